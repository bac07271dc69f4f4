// Package media inspects attachment bytes: what they are (Sniff, by their
// first bytes, never by the client's word alone), an image's size from its
// header (Config, refusing decompression bombs before decoding a pixel;
// HEIFSize for the HEIF images it does not decode, from their container),
// thumbnails (Thumbnail), the removal of location data (Strip, and StripLocation for a head),
// a picture's EXIF orientation wherever its file keeps it (Orientation) and
// the length of audio and video files (Duration).
//
// Everything here is a pure function of the bytes it is given, bounded in
// memory by its arguments, and safe for concurrent use.
package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	chat "github.com/chatd/chatd"
)

// SniffLen is how many leading bytes Sniff looks at.
const SniffLen = 512

// ErrMismatch says the bytes are not what the uploader declared.
var ErrMismatch = errors.New("the bytes are not the declared type")

// signatureTypes have unmistakable first bytes: declaring one of them
// for bytes that do not start so is a lie (an HTML page as image/png).
var signatureTypes = map[string]bool{
	"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true, "image/bmp": true,
	"application/pdf": true, "application/zip": true, "application/gzip": true,
	"application/x-7z-compressed": true, "application/vnd.rar": true, "application/rtf": true,
}

// containers are generic signatures and the declared types whose files
// start with them (an .docx is a zip, an .m4a an MP4, a voice note from
// a browser's recorder a WebM).
var containers = map[string][]string{
	"application/zip": {"application/vnd.openxmlformats-officedocument.", "application/vnd.oasis.opendocument.",
		"application/epub+zip", "application/java-archive", "application/vnd.android.package-archive"},
	"application/x-ole-storage": {"application/msword", "application/vnd.ms-excel", "application/vnd.ms-powerpoint",
		"application/vnd.ms-outlook"},
	"video/mp4":       {"audio/mp4", "audio/x-m4a", "audio/m4a", "audio/aac", "video/quicktime", "video/3gpp", "audio/3gpp"},
	"video/quicktime": {"video/mp4"},
	"video/webm":      {"audio/webm", "video/x-matroska", "audio/x-matroska"},
	"application/ogg": {"audio/ogg", "audio/opus", "video/ogg", "audio/vorbis"},
	"audio/wave":      {"audio/wav", "audio/x-wav", "audio/vnd.wave"},
	"audio/mpeg":      {"audio/mp3"},
	"text/plain":      {"text/"},
	// HEIC files are HEIF files.
	"image/heic":          {"image/heif"},
	"image/heic-sequence": {"image/heif-sequence"},
}

// heifType names a file of the HEIF container (ISO/IEC 23008-12) by the
// brands of its ftyp: HEIC (HEVC-coded, what iPhones take), AVIF
// (AV1-coded), other HEIF images, and their sequences. A file whose
// major brand is a structural one (mif1, msf1, miaf) is named by its
// compatible brands. "" for any other file.
func heifType(head []byte) string {
	size := int(binary.BigEndian.Uint32(head))
	if size < 16 || size%4 != 0 {
		return ""
	}
	brands := head[min(16, len(head)):min(size, len(head))]
	has := func(bs ...string) bool {
		for i := 0; i+4 <= len(brands); i += 4 {
			if slices.Contains(bs, string(brands[i:i+4])) {
				return true
			}
		}
		return false
	}
	switch string(head[8:12]) {
	case "avif", "avis":
		return "image/avif"
	case "heic", "heix", "heim", "heis":
		return "image/heic"
	case "hevc", "hevx", "hevm", "hevs":
		return "image/heic-sequence"
	case "mif1", "miaf", "mif2":
		switch {
		case has("avif"):
			return "image/avif"
		case has("heic", "heix", "heim", "heis"):
			return "image/heic"
		}
		return "image/heif"
	case "msf1":
		switch {
		case has("avis"):
			return "image/avif"
		case has("hevc", "hevx", "hevm", "hevs"):
			return "image/heic-sequence"
		}
		return "image/heif-sequence"
	}
	return ""
}

// Detect names the type of the bytes head (a file's first SniffLen or
// fewer) as Sniff does: Go's sniffer (the WHATWG algorithm) and the
// signatures it lacks (HEIC, HEIF and AVIF by their ftyp brands, 7z,
// FLAC, ...). Declared as this type, the file is served as it (when the
// type is allowed): clients that cannot tell a file's type by its name
// declare it.
func Detect(head []byte) string {
	if len(head) > SniffLen {
		head = head[:SniffLen]
	}
	switch {
	case bytes.HasPrefix(head, []byte("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1")):
		return "application/x-ole-storage"
	case bytes.HasPrefix(head, []byte("7z\xBC\xAF\x27\x1C")):
		return "application/x-7z-compressed"
	case bytes.HasPrefix(head, []byte("{\\rtf")):
		return "application/rtf"
	case bytes.HasPrefix(head, []byte("fLaC")):
		return "audio/flac"
	case bytes.HasPrefix(head, []byte("#!AMR")):
		return "audio/amr"
	case len(head) >= 2 && head[0] == 0xFF && (head[1]&0xF6) == 0xF0:
		return "audio/aac" // ADTS
	case len(head) >= 12 && string(head[4:8]) == "ftyp":
		switch string(head[8:12]) {
		case "M4A ", "M4B ":
			return "audio/mp4"
		case "qt  ":
			return "video/quicktime"
		case "3gp4", "3gp5", "3gp6", "3g2a":
			return "video/3gpp"
		}
		if t := heifType(head); t != "" {
			return t
		}
	case len(head) > 262 && string(head[257:262]) == "ustar":
		return "application/x-tar"
	}
	t := http.DetectContentType(head)
	t, _, _ = strings.Cut(t, ";")
	switch t {
	case "application/x-gzip":
		return "application/gzip"
	case "application/x-rar-compressed":
		return "application/vnd.rar"
	case "audio/mp4":
		return "video/mp4" // Go names MP4 by its brand
	}
	return t
}

// Sniff decides the type an upload is served as, from its first bytes
// (up to SniffLen) and what the uploader declared, or refuses it:
//
//   - bytes that are what was declared, or a container of it (a .docx is
//     a zip), are served as declared;
//   - bytes whose signature names another allowed type of the same kind
//     (a PNG declared as image/jpeg) are served as what they are;
//   - a declared type with a signature the bytes lack (an HTML page as
//     image/png), and bytes of a type that is not allowed (HTML, SVG,
//     executables), are refused: ErrMismatch or chat's unsupported;
//   - bytes without a signature (plain text, raw audio) keep the declared
//     type when it is allowed and has no signature of its own.
func Sniff(head []byte, declared string, allowed []string) (string, error) {
	if len(head) > SniffLen {
		head = head[:SniffLen]
	}
	got := Detect(head)
	if got == declared {
		return ok(got, allowed)
	}
	for _, d := range containers[got] {
		if declared == d || (strings.HasSuffix(d, "/") || strings.HasSuffix(d, ".")) && strings.HasPrefix(declared, d) {
			return ok(declared, allowed)
		}
	}
	major := func(t string) string { m, _, _ := strings.Cut(t, "/"); return m }
	generic := got == "application/octet-stream" || got == "text/plain"
	switch {
	case !generic && major(got) == major(declared) && major(got) != "application" && major(got) != "text":
		// A PNG declared as JPEG, an MP3 declared as audio/ogg: serve
		// what it is.
		return ok(got, allowed)
	case !generic:
		return "", fmt.Errorf("%w: the file is %s, declared %s", ErrMismatch, got, declared)
	case signatureTypes[declared] || major(declared) == "image":
		return "", fmt.Errorf("%w: the file does not start as a %s does", ErrMismatch, declared)
	case got == "text/plain" && !(major(declared) == "text" || strings.HasSuffix(declared, "+json") ||
		strings.HasSuffix(declared, "+xml") || declared == "application/json"):
		// Text declared as a binary format (a script as video/mp4).
		return "", fmt.Errorf("%w: the file is text, declared %s", ErrMismatch, declared)
	}
	return ok(declared, allowed)
}

func ok(t string, allowed []string) (string, error) {
	if !chat.TypeAllowed(allowed, t) {
		return "", chat.Errorf(chat.CodeUnsupported, "files of type %s are not accepted here", t)
	}
	return t, nil
}
