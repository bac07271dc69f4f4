package authparam_test

import (
	"testing"

	"github.com/chatd/chatd/internal/authparam"
)

func TestParseSplitsAtCommasAndTheFirstEquals(t *testing.T) {
	got := authparam.Parse("Credential=AK/20240101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date,Signature=ab=cd, bare")
	want := map[string]string{
		"Credential":    "AK/20240101/us-east-1/s3/aws4_request",
		"SignedHeaders": "host;x-amz-date",
		"Signature":     "ab=cd",
		"bare":          "",
	}
	if len(got) != len(want) {
		t.Fatalf("Parse = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if got := authparam.Parse("t=1, t=2"); got["t"] != "2" {
		t.Errorf("a repeated key keeps %q, want the last value", got["t"])
	}
}
