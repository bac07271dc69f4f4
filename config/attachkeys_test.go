package config

import (
	"errors"
	"strings"
	"testing"
)

func TestAttachmentSettingsNameTheKeyTheSourceAndTheFix(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"an endpoint without a bucket", map[string]string{"CHAT_S3_ENDPOINT": "minio:9000", "CHAT_S3_ACCESS_KEY": "a", "CHAT_S3_SECRET_KEY": "s"},
			[]string{"s3_bucket (from env CHAT_S3_ENDPOINT)", "set s3_bucket (CHAT_S3_BUCKET)"}},
		{"an endpoint without credentials", map[string]string{"CHAT_S3_ENDPOINT": "minio:9000", "CHAT_S3_BUCKET": "b"},
			[]string{"s3_access_key", "CHAT_S3_ACCESS_KEY"}},
		{"a bucket without an endpoint", map[string]string{"CHAT_S3_BUCKET": "b"},
			[]string{"s3_bucket (from env CHAT_S3_BUCKET)", "set s3_endpoint"}},
		{"an endpoint with a scheme", map[string]string{"CHAT_S3_ENDPOINT": "https://s3.example"},
			[]string{"s3_endpoint", "without a scheme"}},
		{"a TTL shorter than the URL", map[string]string{"CHAT_UPLOAD_TTL": "10m"},
			[]string{"upload_ttl (from env CHAT_UPLOAD_TTL)", "longer than upload_url_expiry"}},
		{"SVG allowed", map[string]string{"CHAT_UPLOAD_TYPES": "image/png,image/svg+xml"},
			[]string{"upload_types", "image/svg+xml is refused", "scripts"}},
		{"not a media type", map[string]string{"CHAT_UPLOAD_TYPES": "png"}, []string{"upload_types", `"png" is not a media type`}},
		{"not a size", map[string]string{"CHAT_MAX_UPLOAD_BYTES": "big"}, []string{"max_upload_bytes", "25MiB"}},
		{"a size too large", map[string]string{"CHAT_MAX_UPLOAD_BYTES": "6GiB"}, []string{"max_upload_bytes", "above"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(nil, env(tc.env))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Load: %v, want a *config.Error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestSizesTakeUnits(t *testing.T) {
	for in, want := range map[string]int64{"25MiB": 25 << 20, "26214400": 26214400, "1 GiB": 1 << 30, "500KB": 500000, "0": 0} {
		got, err := parseBytes(in, 0, 1<<40)
		if err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	s := mustLoad(t, nil, map[string]string{"CHAT_S3_SECRET_KEY": "hunter2", "CHAT_S3_ENDPOINT": "m:9000", "CHAT_S3_BUCKET": "b", "CHAT_S3_ACCESS_KEY": "a"})
	if got := s.Redacted()["s3_secret_key"]; got != "[redacted]" {
		t.Errorf("s3_secret_key is logged as %v", got)
	}
}
