package config

import (
	"errors"
	"fmt"
	"mime"
	"strconv"
	"strings"
	"time"

	chat "github.com/chatd/chatd"
)

// AttachmentSettings are the settings of attachments: limits, expiries,
// and where the bytes live (part of Settings). Without s3_endpoint the
// bytes live on local disk under <data_dir>/blobs.
type AttachmentSettings struct {
	MaxUploadBytes    int64         // max_upload_bytes
	MaxAvatarBytes    int64         // max_avatar_bytes (within max_upload_bytes)
	UploadTypes       []string      // upload_types: "type/subtype" or "type/*"
	UploadTTL         time.Duration // upload_ttl: uploads never attached are deleted after
	UploadURLExpiry   time.Duration // upload_url_expiry
	DownloadURLExpiry time.Duration // download_url_expiry (object store redirects)
	UploadBytesPerDay int64         // upload_bytes_per_day: 0 = no quota
	LimitUploadRate   float64       // limit_upload_rate: uploads per second per user, 0 = unlimited
	LimitUploadBurst  int           // limit_upload_burst
	ImageMaxPixels    int64         // image_max_pixels
	ThumbnailWorkers  int           // thumbnail_workers

	S3Endpoint  string // s3_endpoint: host[:port]; "" = local disk
	S3Bucket    string // s3_bucket
	S3Region    string // s3_region
	S3AccessKey string // s3_access_key
	S3SecretKey string // s3_secret_key
	S3UseTLS    bool   // s3_use_tls
}

// UploadLimits returns the limits the settings describe.
func (s Settings) UploadLimits() chat.UploadLimits {
	return chat.UploadLimits{MaxBytes: s.MaxUploadBytes, MaxAvatarBytes: s.MaxAvatarBytes, Types: s.UploadTypes, MaxPixels: s.ImageMaxPixels}
}

// parseBytes reads a size: a whole number of bytes, or one with a unit
// (KiB, MiB, GiB; KB, MB, GB are powers of 1000).
func parseBytes(v string, lo, hi int64) (int64, error) {
	t := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000_000}, {"GB", 1000_000_000}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, errors.New("is not a size (a whole number of bytes, or with KiB, MiB or GiB)")
	}
	if n > hi/mult {
		return 0, fmt.Errorf("is above %d bytes", hi)
	}
	n *= mult
	if n < lo {
		return 0, fmt.Errorf("is below %d bytes", lo)
	}
	return n, nil
}

var attachmentKeys = []*key{
	mk("max_upload_bytes", "25MiB", "largest attachment in bytes (KiB, MiB, GiB allowed); larger uploads are refused with 413",
		"use a size between 1 and 5GiB such as 25MiB or 26214400",
		func(s *Settings, v string) (err error) { s.MaxUploadBytes, err = parseBytes(v, 1, 5<<30); return }),
	mk("max_avatar_bytes", "10MiB", "largest avatar upload in bytes (KiB, MiB, GiB allowed), within max_upload_bytes; larger ones are refused with 413",
		"use a size between 1 and 5GiB such as 10MiB",
		func(s *Settings, v string) (err error) { s.MaxAvatarBytes, err = parseBytes(v, 1, 5<<30); return }),
	listKey(mk("upload_types", strings.Join(chat.DefaultUploadTypes, ","),
		"comma-separated attachment media types accepted (type/subtype or type/*), checked against the sniffed bytes; others are refused with 415",
		"use media types like image/jpeg,image/png,audio/*,application/pdf",
		func(s *Settings, v string) error {
			list := splitList(v)
			if len(list) == 0 {
				return errors.New("is empty: no file could be sent")
			}
			for i, t := range list {
				mt, _, err := mime.ParseMediaType(t)
				major, minor, ok := strings.Cut(mt, "/")
				if err != nil || !ok || major == "" || minor == "" || major == "*" {
					return fmt.Errorf("%q is not a media type like image/png or audio/*", t)
				}
				if mt == "text/html" || mt == "image/svg+xml" || mt == "text/*" || mt == "image/*" {
					return fmt.Errorf("%s is refused: browsers run scripts in it (list the image types one by one)", mt)
				}
				list[i] = mt
			}
			s.UploadTypes = list
			return nil
		})),
	mk("upload_ttl", "24h", "uploads never attached to a message are deleted this long after they were made",
		"use a Go duration longer than upload_url_expiry, such as 24h",
		func(s *Settings, v string) (err error) { s.UploadTTL, err = parseDuration(v); return }),
	mk("upload_url_expiry", "15m", "how long an upload URL (chatd's or a presigned one) accepts the bytes",
		"use a Go duration between 1m and 7 days, such as 15m",
		func(s *Settings, v string) (err error) {
			s.UploadURLExpiry, err = parseDurationBetween(v, time.Minute, 7*24*time.Hour, "1m and 168h")
			return
		}),
	mk("download_url_expiry", "5m", "how long a presigned download URL of the object store is valid (chatd redirects to one per request)",
		"use a Go duration between 1s and 7 days, such as 5m",
		func(s *Settings, v string) (err error) {
			s.DownloadURLExpiry, err = parseDurationBetween(v, time.Second, 7*24*time.Hour, "1s and 168h")
			return
		}),
	mk("upload_bytes_per_day", "2GiB", "attachment bytes one user may upload per UTC day; over it, 429 until midnight UTC; 0 = no quota",
		"use a size such as 2GiB or 500MiB, or 0",
		func(s *Settings, v string) (err error) { s.UploadBytesPerDay, err = parseBytes(v, 0, 1<<50); return }),
	rateKey("limit_upload_rate", "1", "upload tickets per second per user; 0 = unlimited",
		func(s *Settings) *float64 { return &s.LimitUploadRate }),
	burstKey("limit_upload_burst", "30", "upload tickets a user may ask for at once (an album of photos)",
		func(s *Settings) *int { return &s.LimitUploadBurst }),
	mk("image_max_pixels", "50000000", "largest image (width × height) chatd measures and thumbnails; larger ones, decompression bombs included, are refused",
		"use a whole number of pixels between 1000 and 1000000000, e.g. 50000000",
		func(s *Settings, v string) (err error) {
			n, err := parseInt(v, 1000, 1_000_000_000)
			s.ImageMaxPixels = int64(n)
			return err
		}),
	mk("thumbnail_workers", "2", "images decoded at once for thumbnails (together within thumbnail_workers × image_max_pixels × 4 bytes)",
		"use a whole number between 1 and 64, e.g. 2",
		func(s *Settings, v string) (err error) { s.ThumbnailWorkers, err = parseInt(v, 1, 64); return }),
	mk("s3_endpoint", "", `S3-compatible object store for attachments (host[:port], e.g. s3.eu-west-1.amazonaws.com or minio:9000); "" keeps them on local disk in <data_dir>/blobs`,
		"use host or host:port without a scheme (s3_use_tls says https), or leave it empty",
		func(s *Settings, v string) error {
			v = strings.TrimSpace(v)
			if strings.Contains(v, "://") || strings.ContainsAny(v, "/ ") {
				return errors.New("is not host[:port]")
			}
			s.S3Endpoint = v
			return nil
		}),
	mk("s3_bucket", "", "bucket of the attachments (private: members get presigned URLs)",
		"use the bucket's name, e.g. chatd-attachments",
		func(s *Settings, v string) error { s.S3Bucket = strings.TrimSpace(v); return nil }),
	mk("s3_region", "us-east-1", "region of the bucket (set, so no request asks for it)",
		"use the region, e.g. eu-west-1 (MinIO, Ceph and Garage take us-east-1 or their own)",
		func(s *Settings, v string) error { s.S3Region = strings.TrimSpace(v); return nil }),
	mk("s3_access_key", "", "access key id of the object store",
		"use the access key id of a user that may read, write and delete in s3_bucket",
		func(s *Settings, v string) error { s.S3AccessKey = strings.TrimSpace(v); return nil }),
	secretKey(mk("s3_secret_key", "", "secret access key of the object store",
		"use the secret key that belongs to s3_access_key",
		func(s *Settings, v string) error { s.S3SecretKey = v; return nil })),
	switchKey("s3_use_tls", "true", "reach the object store over https",
		func(s *Settings) *bool { return &s.S3UseTLS }),
}

// checkAttachments validates combinations of the attachment keys.
func (s *Settings) checkAttachments() error {
	if s.UploadTTL <= s.UploadURLExpiry {
		return &Error{Key: "upload_ttl", Source: s.Source("upload_ttl"),
			Reason: fmt.Sprintf("upload_ttl (%s) must be longer than upload_url_expiry (%s): an upload could be deleted while its URL still accepts bytes", s.UploadTTL, s.UploadURLExpiry),
			Fix:    "raise upload_ttl (default 24h) or lower upload_url_expiry (default 15m)"}
	}
	if s.S3Endpoint == "" {
		for _, k := range []struct {
			key string
			set bool
		}{{"s3_bucket", s.S3Bucket != ""}, {"s3_access_key", s.S3AccessKey != ""}, {"s3_secret_key", s.S3SecretKey != ""}} {
			if k.set {
				return &Error{Key: k.key, Source: s.Source(k.key),
					Reason: k.key + " is set but s3_endpoint is not, so attachments stay on local disk",
					Fix:    "set s3_endpoint (CHAT_S3_ENDPOINT, e.g. s3.eu-west-1.amazonaws.com), or unset " + k.key}
			}
		}
		return nil
	}
	for _, k := range []struct{ key, val string }{{"s3_bucket", s.S3Bucket}, {"s3_access_key", s.S3AccessKey}, {"s3_secret_key", s.S3SecretKey}} {
		if k.val == "" {
			return &Error{Key: k.key, Source: s.Source("s3_endpoint"),
				Reason: "s3_endpoint is set but " + k.key + " is not",
				Fix:    fmt.Sprintf("set %s (CHAT_%s), or unset s3_endpoint to keep attachments on local disk", k.key, strings.ToUpper(k.key))}
		}
	}
	return nil
}

// redactedAttachments adds the attachment keys to Redacted's map.
func (s Settings) redactedAttachments(m map[string]any) {
	m["max_upload_bytes"] = s.MaxUploadBytes
	m["max_avatar_bytes"] = s.MaxAvatarBytes
	m["upload_types"] = append([]string{}, s.UploadTypes...)
	m["upload_ttl"] = s.UploadTTL.String()
	m["upload_url_expiry"] = s.UploadURLExpiry.String()
	m["download_url_expiry"] = s.DownloadURLExpiry.String()
	m["upload_bytes_per_day"] = s.UploadBytesPerDay
	m["limit_upload_rate"] = s.LimitUploadRate
	m["limit_upload_burst"] = s.LimitUploadBurst
	m["image_max_pixels"] = s.ImageMaxPixels
	m["thumbnail_workers"] = s.ThumbnailWorkers
	m["s3_endpoint"] = s.S3Endpoint
	m["s3_bucket"] = s.S3Bucket
	m["s3_region"] = s.S3Region
	m["s3_access_key"] = s.S3AccessKey
	m["s3_secret_key"] = redactSecret(s.S3SecretKey)
	m["s3_use_tls"] = s.S3UseTLS
}
