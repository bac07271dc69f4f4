package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

func claims(sub any, exp time.Time) jwt.MapClaims {
	return jwt.MapClaims{"sub": sub, "iat": time.Now().Unix(), "exp": exp.Unix()}
}

func future() time.Time { return time.Now().Add(time.Hour) }

// rejects asserts Verify fails with ErrInvalidToken and reason, without
// echoing the token.
func rejects(t *testing.T, v *Verifier, tok string, reason error) {
	t.Helper()
	id, err := v.Verify(tok)
	if err == nil {
		t.Fatalf("Verify accepted the token (user %d), want %v", id, reason)
	}
	if id != 0 {
		t.Errorf("Verify returned user %d with an error", id)
	}
	if !errors.Is(err, ErrInvalidToken) {
		t.Errorf("error %v does not match ErrInvalidToken", err)
	}
	if reason != nil && !errors.Is(err, reason) {
		t.Errorf("error %q, want reason %q", err, reason)
	}
	var ite *InvalidTokenError
	if !errors.As(err, &ite) {
		t.Errorf("error is %T, want *InvalidTokenError", err)
	}
	if len(tok) > 8 && strings.Contains(err.Error(), tok) {
		t.Errorf("error text contains the token")
	}
	for _, part := range strings.Split(tok, ".") {
		if len(part) > 8 && strings.Contains(err.Error(), part) {
			t.Errorf("error text contains a token segment")
		}
	}
}

func accepts(t *testing.T, v *Verifier, tok string, want int64) {
	t.Helper()
	id, err := v.Verify(tok)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if id != want {
		t.Fatalf("Verify = %d, want %d", id, want)
	}
}

func TestMintVerifyHS256(t *testing.T) {
	tok, err := Mint(testSecret, 42, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	accepts(t, NewVerifier(testSecret, nil), tok, 42)
	rejects(t, NewVerifier([]byte("another-secret-another-secret-xx"), nil), tok, ErrSignature)

	// Claims as documented: sub, iat, exp.
	var c jwt.MapClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil {
		t.Fatal(err)
	}
	if c["sub"] != "42" || c["iat"] == nil || c["exp"] == nil {
		t.Errorf("claims = %v", c)
	}
	if got := NewVerifier(testSecret, nil).Algorithms(); len(got) != 1 || got[0] != AlgHS256 {
		t.Errorf("Algorithms = %v", got)
	}
}

func TestMintRejectsBadInput(t *testing.T) {
	if _, err := Mint(nil, 1, time.Hour); err == nil {
		t.Error("empty secret accepted")
	}
	if _, err := Mint(testSecret, 0, time.Hour); err == nil {
		t.Error("user 0 accepted")
	}
	if _, err := Mint(testSecret, 1, 0); err == nil {
		t.Error("zero ttl accepted")
	}
}

func TestRejectAlgNone(t *testing.T) {
	v := NewVerifier(testSecret, rsaPublic(t))
	c := map[string]any{"sub": "1", "exp": future().Unix()}
	for _, alg := range []string{"none", "None", "NONE", "nOnE"} {
		rejects(t, v, unsigned(map[string]any{"alg": alg, "typ": "JWT"}, c, ""), ErrAlgorithm)
	}
	// jwt's own none signer, too.
	tok := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "1", "exp": future().Unix()})
	rejects(t, v, tok, ErrAlgorithm)
	// And with a (bogus) signature attached.
	rejects(t, v, unsigned(map[string]any{"alg": "none"}, c, "c2ln"), ErrAlgorithm)
	// No alg at all.
	rejects(t, v, unsigned(map[string]any{"typ": "JWT"}, c, "c2ln"), ErrAlgorithm)
}

func TestRejectOtherAlgorithms(t *testing.T) {
	v := NewVerifier(testSecret, rsaPublic(t))
	c := claims("1", future())
	// HS384/HS512 with the right secret: still not HS256.
	rejects(t, v, sign(t, jwt.SigningMethodHS384, testSecret, c), ErrAlgorithm)
	rejects(t, v, sign(t, jwt.SigningMethodHS512, testSecret, c), ErrAlgorithm)
	// PS256 with the right RSA key: not RS256.
	rejects(t, v, sign(t, jwt.SigningMethodPS256, rsaPrivate(t), c), ErrAlgorithm)
}

func TestRejectHSRSConfusion(t *testing.T) {
	pub := rsaPublic(t)
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	c := claims("1", future())
	for name, fake := range map[string][]byte{
		"pem":   readPEM(t, "rsa_public.pem"),
		"der":   der,
		"pkcs1": x509.MarshalPKCS1PublicKey(pub),
	} {
		t.Run(name, func(t *testing.T) {
			tok := sign(t, jwt.SigningMethodHS256, fake, c)
			rejects(t, NewVerifier(testSecret, pub), tok, ErrSignature)
			// Even with no HS secret configured, HS256 is off entirely.
			rejects(t, NewVerifier(nil, pub), tok, ErrAlgorithm)
		})
	}
	// Ed25519 public key bytes as an HMAC secret.
	edPub := edPublic(t)
	tok := sign(t, jwt.SigningMethodHS256, []byte(edPub), c)
	rejects(t, NewVerifier(testSecret, edPub), tok, ErrSignature)
	rejects(t, NewVerifier(nil, edPub), tok, ErrAlgorithm)
}

func TestNoHS256WithoutSecret(t *testing.T) {
	tok := sign(t, jwt.SigningMethodHS256, []byte{}, claims("1", future()))
	rejects(t, NewVerifier(nil, nil), tok, ErrAlgorithm)
	rejects(t, NewVerifier([]byte{}, rsaPublic(t)), tok, ErrAlgorithm)
}

func TestRS256(t *testing.T) {
	tok := sign(t, jwt.SigningMethodRS256, rsaPrivate(t), claims("77", future()))
	accepts(t, NewVerifier(testSecret, rsaPublic(t)), tok, 77)
	accepts(t, NewVerifier(nil, rsaPublic(t)), tok, 77)
	rejects(t, NewVerifier(testSecret, nil), tok, ErrAlgorithm)
	rejects(t, NewVerifier(testSecret, edPublic(t)), tok, ErrAlgorithm)

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rejects(t, NewVerifier(testSecret, &other.PublicKey), tok, ErrSignature)
	if got := NewVerifier(testSecret, rsaPublic(t)).Algorithms(); len(got) != 2 || got[1] != AlgRS256 {
		t.Errorf("Algorithms = %v", got)
	}
}

func TestEdDSA(t *testing.T) {
	tok := sign(t, jwt.SigningMethodEdDSA, edPrivate(t), claims("9", future()))
	accepts(t, NewVerifier(testSecret, edPublic(t)), tok, 9)
	pk := edPublic(t)
	accepts(t, NewVerifier(nil, &pk), tok, 9)
	rejects(t, NewVerifier(testSecret, nil), tok, ErrAlgorithm)
	rejects(t, NewVerifier(testSecret, rsaPublic(t)), tok, ErrAlgorithm)

	otherPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rejects(t, NewVerifier(nil, otherPub), tok, ErrSignature)
	// A truncated key enables nothing rather than panicking.
	rejects(t, NewVerifier(nil, ed25519.PublicKey(pk[:10])), tok, ErrAlgorithm)
}

func TestExpiry(t *testing.T) {
	v := NewVerifier(testSecret, nil)
	rejects(t, v, sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "1"}), ErrMissingExp)
	rejects(t, v, sign(t, jwt.SigningMethodHS256, testSecret, claims("1", time.Now().Add(-time.Minute))), ErrExpired)
	rejects(t, v, sign(t, jwt.SigningMethodHS256, testSecret, claims("1", time.Unix(0, 0))), ErrExpired)
	// Within the 30s leeway.
	accepts(t, v, sign(t, jwt.SigningMethodHS256, testSecret, claims("1", time.Now().Add(-10*time.Second))), 1)
	// exp of the wrong type.
	rejects(t, v, sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "1", "exp": "tomorrow"}), ErrMalformed)

	// An expired Mint token, by moving the verifier's clock.
	tok, _ := Mint(testSecret, 5, time.Minute)
	v.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	rejects(t, v, tok, ErrExpired)
}

func TestNotBeforeAndIssuedAt(t *testing.T) {
	v := NewVerifier(testSecret, nil)
	c := claims("1", future().Add(time.Hour))
	c["nbf"] = time.Now().Add(time.Hour).Unix()
	rejects(t, v, sign(t, jwt.SigningMethodHS256, testSecret, c), ErrNotYetValid)

	c = claims("1", future().Add(time.Hour))
	c["iat"] = time.Now().Add(time.Hour).Unix()
	rejects(t, v, sign(t, jwt.SigningMethodHS256, testSecret, c), ErrNotYetValid)

	c = claims("1", future())
	c["nbf"] = time.Now().Add(-time.Minute).Unix()
	accepts(t, v, sign(t, jwt.SigningMethodHS256, testSecret, c), 1)
}

func TestSubject(t *testing.T) {
	v := NewVerifier(testSecret, nil)
	for _, sub := range []string{"0", "-1", "9223372036854775808", "99999999999999999999", "1e3", " 7", "7 ", "+7", "07", "", "abc", "7.0", "0x10", "٣"} {
		t.Run(sub, func(t *testing.T) {
			rejects(t, v, sign(t, jwt.SigningMethodHS256, testSecret, claims(sub, future())), ErrSubject)
		})
	}
	// Missing sub, and a numeric sub (JSON number, not a string).
	rejects(t, v, sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"exp": future().Unix()}), ErrSubject)
	rejects(t, v, sign(t, jwt.SigningMethodHS256, testSecret, claims(7, future())), ErrMalformed)

	accepts(t, v, sign(t, jwt.SigningMethodHS256, testSecret, claims("1", future())), 1)
	accepts(t, v, sign(t, jwt.SigningMethodHS256, testSecret, claims("9223372036854775807", future())), 9223372036854775807)
}

func TestTooLarge(t *testing.T) {
	v := NewVerifier(testSecret, nil)
	c := claims("1", future())
	c["pad"] = strings.Repeat("x", 4000)
	tok := sign(t, jwt.SigningMethodHS256, testSecret, c)
	if len(tok) <= MaxTokenBytes {
		t.Fatalf("test token is only %d bytes", len(tok))
	}
	rejects(t, v, tok, ErrTooLarge)
	rejects(t, v, strings.Repeat("a", MaxTokenBytes+1), ErrTooLarge)

	// Just under the limit is fine.
	c["pad"] = strings.Repeat("x", 2800)
	tok = sign(t, jwt.SigningMethodHS256, testSecret, c)
	if len(tok) > MaxTokenBytes {
		t.Fatalf("test token is %d bytes", len(tok))
	}
	accepts(t, v, tok, 1)
}

func TestMalformed(t *testing.T) {
	v := NewVerifier(testSecret, nil)
	good := sign(t, jwt.SigningMethodHS256, testSecret, claims("1", future()))
	parts := strings.Split(good, ".")
	for name, tok := range map[string]string{
		"empty":         "",
		"two parts":     parts[0] + "." + parts[1],
		"four parts":    good + ".x",
		"bad base64":    "!!!." + parts[1] + "." + parts[2],
		"padded":        parts[0] + "=." + parts[1] + "." + parts[2],
		"header json":   "bm90IGpzb24." + parts[1] + "." + parts[2],
		"spaces":        " " + good,
		"bad signature": parts[0] + "." + parts[1] + ".AAAA",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("Verify = %v, want ErrInvalidToken", err)
			}
		})
	}
	// A signature with non-canonical trailing bits decodes to the same
	// bytes with lenient base64; strict decoding rejects it.
	sig := []byte(parts[2])
	last := sig[len(sig)-1]
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	idx := strings.IndexByte(alphabet, last)
	sig[len(sig)-1] = alphabet[idx|1] // 32-byte HMAC: 43 chars, 2 unused bits
	if string(sig) != parts[2] {
		rejects(t, v, parts[0]+"."+parts[1]+"."+string(sig), ErrMalformed)
	}
}

func TestParseUserID(t *testing.T) {
	for s, want := range map[string]int64{"1": 1, "42": 42, "9223372036854775807": 1<<63 - 1} {
		if got, ok := ParseUserID(s); !ok || got != want {
			t.Errorf("ParseUserID(%q) = %d, %v", s, got, ok)
		}
	}
	for _, s := range []string{"0", "-1", "9223372036854775808", "1e3", " 7", "07", "+1", ""} {
		if _, ok := ParseUserID(s); ok {
			t.Errorf("ParseUserID(%q) accepted", s)
		}
	}
}

func TestLoadOrCreateSecret(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := LoadSecret(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LoadSecret on an empty dir = %v, want ErrNotExist", err)
	}
	s1, err := LoadOrCreateSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s1) != SecretBytes {
		t.Fatalf("secret is %d bytes", len(s1))
	}
	st, err := os.Stat(SecretPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(SecretPath(dir))
	if strings.TrimSpace(string(raw)) != hex.EncodeToString(s1) {
		t.Errorf("file is not the hex secret")
	}
	s2, err := LoadOrCreateSecret(dir)
	if err != nil || string(s1) != string(s2) {
		t.Fatalf("second load differs (err %v)", err)
	}
	s3, err := LoadSecret(dir)
	if err != nil || string(s1) != string(s3) {
		t.Fatalf("LoadSecret differs (err %v)", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temp files left behind: %v", ents)
	}

	// Corrupt and short files are errors saying what to do.
	os.WriteFile(SecretPath(dir), []byte("not hex"), 0o600)
	if _, err := LoadOrCreateSecret(dir); err == nil || !strings.Contains(err.Error(), "delete the file") {
		t.Errorf("corrupt secret: %v", err)
	}
	os.WriteFile(SecretPath(dir), []byte("abcd\n"), 0o600)
	if _, err := LoadOrCreateSecret(dir); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short secret: %v", err)
	}
}

func TestLoadOrCreateSecretConcurrent(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	got := make([][]byte, 16)
	errs := make([]error, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = LoadOrCreateSecret(dir)
		}()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if string(got[i]) != string(got[0]) {
			t.Fatalf("creator %d got a different secret", i)
		}
	}
	onDisk, _ := LoadSecret(dir)
	if string(onDisk) != string(got[0]) {
		t.Fatal("the file differs from what the creators returned")
	}
}

func TestLoadPublicKey(t *testing.T) {
	for _, name := range []string{"rsa_public.pem", "rsa_public_pkcs1.pem"} {
		k, err := LoadPublicKey(filepath.Join("testdata", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := k.(*rsa.PublicKey); !ok {
			t.Errorf("%s: got %T", name, k)
		}
	}
	k, err := LoadPublicKey(filepath.Join("testdata", "ed25519_public.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := k.(ed25519.PublicKey); !ok {
		t.Errorf("ed25519: got %T", k)
	}

	// A certificate carrying the Ed25519 key.
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, edPublic(t), edPrivate(t))
	if err != nil {
		t.Fatal(err)
	}
	cert := filepath.Join(t.TempDir(), "cert.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	if k, err := LoadPublicKey(cert); err != nil || !edPublic(t).Equal(k) {
		t.Errorf("certificate: %v", err)
	}

	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	os.WriteFile(garbage, []byte("hello"), 0o600)
	for name, want := range map[string]string{
		"rsa1024_public.pem":    "at least 2048",
		"ecdsa_p384_public.pem": "not supported",
		"rsa_private.pem":       "private key",
		"ed25519_private.pem":   "private key",
		"missing.pem":           "no such file",
		garbage:                 "no PEM block",
	} {
		path := name
		if !filepath.IsAbs(name) {
			path = filepath.Join("testdata", name)
		}
		if _, err := LoadPublicKey(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", name, err, want)
		}
	}
}
