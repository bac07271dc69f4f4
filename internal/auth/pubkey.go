package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
)

// MinRSABits is the smallest RSA modulus LoadPublicKey accepts.
const MinRSABits = 2048

// LoadPublicKey reads a PEM public key for RS256, ES256 or EdDSA: a
// "PUBLIC KEY" (PKIX: RSA, ECDSA P-256 or Ed25519), an "RSA PUBLIC KEY"
// (PKCS #1) or a "CERTIFICATE" whose key is one of those. It returns
// *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey.
func LoadPublicKey(path string) (crypto.PublicKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read JWT public key: %w", err)
	}
	key, err := ParsePublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("JWT public key %s: %w", path, err)
	}
	return key, nil
}

// ParsePublicKey is LoadPublicKey on PEM bytes.
func ParsePublicKey(pemBytes []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, fmt.Errorf("no PEM block found; expected -----BEGIN PUBLIC KEY-----")
	}
	var key any
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	default:
		if strings.Contains(block.Type, "PRIVATE KEY") {
			return nil, fmt.Errorf("this is a private key (%s); give the public key instead, e.g. `openssl pkey -in key.pem -pubout -out pub.pem`", block.Type)
		}
		return nil, fmt.Errorf("unsupported PEM block %q; expected PUBLIC KEY", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", block.Type, err)
	}
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < MinRSABits {
			return nil, fmt.Errorf("RSA key is %d bits, want at least %d", k.N.BitLen(), MinRSABits)
		}
		return k, nil
	case ed25519.PublicKey:
		return k, nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA key on %s is not supported; ES256 needs a P-256 key", k.Curve.Params().Name)
		}
		return k, nil
	default:
		return nil, fmt.Errorf("key type %T is not supported; use an RSA (RS256), ECDSA P-256 (ES256) or Ed25519 (EdDSA) key", key)
	}
}
