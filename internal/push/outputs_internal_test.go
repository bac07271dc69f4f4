package push

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWebPushReachesPublicAddressesOnly: every range of the IANA
// special-purpose registries that is not globally reachable is refused,
// also when an IPv6 address carries an IPv4 one (mapped, NAT64, 6to4,
// Teredo) that is not.
func TestWebPushReachesPublicAddressesOnly(t *testing.T) {
	for _, a := range []string{
		"0.0.0.0", "0.1.2.3", "10.1.2.3", "100.64.0.1", "127.0.0.1", "169.254.169.254", "172.16.0.1",
		"192.0.0.8", "192.0.2.1", "192.88.99.1", "192.168.1.1", "198.18.0.1", "198.19.255.254", "198.51.100.1",
		"203.0.113.1", "224.0.0.1", "240.0.0.1", "255.255.255.255",
		"::", "::1", "::ffff:10.0.0.1", "::ffff:127.0.0.1", "::10.0.0.1", "64:ff9b::a00:1", "64:ff9b::7f00:1",
		"64:ff9b:1::a00:1", "100::1", "2001::1", "2001:0:4136:e378:8000:63bf:f5ff:fffe", "2001:2::1",
		"2001:db8::1", "2002:a00:1::1", "2002:7f00:1::1", "3fff::1", "5f00::1", "fc00::1", "fd12::1",
		"fe80::1", "fec0::1", "ff02::1",
	} {
		if publicAddr(netip.MustParseAddr(a)) {
			t.Errorf("%s counts as public", a)
		}
	}
	for _, a := range []string{
		"1.1.1.1", "8.8.8.8", "142.250.185.106", "192.0.0.9", "100.63.255.255", "100.128.0.1", "198.17.255.255",
		"198.20.0.1", "223.255.255.254", "::ffff:8.8.8.8", "64:ff9b::808:808",
		"2a00:1450:4001:82a::200a", "2606:4700::6810:84e5",
	} {
		if !publicAddr(netip.MustParseAddr(a)) {
			t.Errorf("%s counts as not public", a)
		}
	}
}

// TestWebPushThroughAProxyChecksTheEndpoint: with HTTPS_PROXY (or
// HTTP_PROXY) set, chatd connects to the proxy, the operator's own
// (here on loopback): the endpoint, where the proxy connects, is what
// must be public.
func TestWebPushThroughAProxyChecksTheEndpoint(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.String())
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	c := newHTTPClientVia(2*time.Second, true, http.ProxyURL(pu))
	post := func(endpoint string) (int, error) {
		resp, err := c.Post(endpoint, "application/octet-stream", strings.NewReader("x"))
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post("http://142.250.185.106/push/a"); err != nil || code != http.StatusCreated {
		t.Errorf("public endpoint through the proxy: %d, %v; want it sent", code, err)
	}
	for _, e := range []string{"http://10.0.0.1/push/b", "http://169.254.169.254/latest/meta-data/", "http://localhost:8080/push/c", "http://[::1]/push/d"} {
		if _, err := post(e); !errors.Is(err, errPrivateAddress) {
			t.Errorf("%s through the proxy: %v, want it refused", e, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Errorf("the proxy was asked for %v, want the public endpoint only", got)
	}
}

// A push service asking for a wait longer than maxRetryAfter gets the cap,
// however many digits it sends: seconds that overflow a Duration, or an
// int64, are not taken for "no wait" (a retry at once, hammering it).
func TestARetryAfterBeyondTheCapWaitsTheCap(t *testing.T) {
	now := time.Now()
	for _, v := range []string{"7200", "10000000000", "9223372036854775807", "99999999999999999999", now.Add(48 * time.Hour).UTC().Format(http.TimeFormat)} {
		if got := retryAfter(v, now); got != maxRetryAfter {
			t.Errorf("Retry-After %q: waits %v, want %v", v, got, maxRetryAfter)
		}
	}
	for v, want := range map[string]time.Duration{"": 0, "0": 0, "-5": 0, "-99999999999999999999": 0, "30": 30 * time.Second, "soon": 0} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: waits %v, want %v", v, got, want)
		}
	}
}
