package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/chatd/chatd/client"
)

// addHTTPFlag is --http, chatd's HTTP API (uploads and downloads).
func addHTTPFlag(fs *flag.FlagSet) *string {
	return fs.String("http", "", "chatd HTTP API, http://host:port or https://host:port (default http://$CHAT_HTTP_ADDR; with it off, the http:// or https:// of a ws:// or wss:// --broker)")
}

// withHTTP resolves --http (flagVal) for a command that moves files over
// chatd's HTTP API when need is true: the flag, else chatd's plain HTTP
// listener, else the client's default, the host of a ws:// or wss://
// broker, whose listener serves the API too. As for --broker, chatd's
// https_addr is not guessed at: its certificate names the host clients
// know it by. Without one of these, a command that needs the API stops
// before connecting, naming the settings and flags to pass.
func (f chatFlags) withHTTP(a *app, flagVal string, need bool) (func(*client.Config), error) {
	s := a.settings
	api := flagVal
	if api == "" && s.HTTPAddr != "" {
		api = "http://" + localAddr(s.HTTPAddr)
	}
	if api == "" && need {
		broker, err := f.brokerURL(a)
		if err != nil {
			return nil, err
		}
		if u, err := url.Parse(broker); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") {
			pass := "pass --http http://HOST:PORT naming a chatd's HTTP API"
			if _, port, err := net.SplitHostPort(s.HTTPSAddr); err == nil {
				pass = fmt.Sprintf("pass --http https://HOST:%s (or --broker wss://HOST:%[1]s/mqtt, which serves both), HOST a name chatd's certificate holds", port)
			}
			return nil, usagef("%s: chatd's http_addr (from %s) is off, so chatctl has no plain HTTP listener of chatd's to move files over; %s",
				f.fs.Name(), s.Source("http_addr"), pass)
		}
	}
	return func(cfg *client.Config) { cfg.HTTPURL = api }, nil
}

// uploadsOverHTTP says whether uploading files (paths; "" is none) goes
// over chatd's HTTP API: it does when chatd keeps them on its own disk;
// with an object store (s3_endpoint) the bytes go straight to it.
func uploadsOverHTTP(a *app, paths ...string) bool {
	return a.settings.S3Endpoint == "" && slices.ContainsFunc(paths, func(p string) bool { return p != "" })
}

// checkFiles opens each of paths (the values of fs's flag name; "" is
// none), so that one that cannot be read is a usage error before chatctl
// connects, and nothing is created or uploaded for a command that then
// fails on a misspelt name. An upload needs a regular file (its size is
// read first).
func checkFiles(fs *flag.FlagSet, name string, paths ...string) error {
	for _, p := range paths {
		if p == "" {
			continue
		}
		f, err := os.Open(p)
		if err == nil {
			var st os.FileInfo
			st, err = f.Stat()
			f.Close()
			if err == nil && !st.Mode().IsRegular() {
				err = fmt.Errorf("%s is not a regular file", p)
			}
		}
		if err != nil {
			return usagef("%s: --%s: %v", fs.Name(), name, err)
		}
	}
	return nil
}

// explainUpload turns a refused upload into what to do next.
func explainUpload(err error, fs *flag.FlagSet, user, conv int64, path string) error {
	var ce *client.Error
	if errors.As(err, &ce) {
		switch ce.Code {
		case "too_large":
			return hint(err, "%s is larger than chatd accepts (max_upload_bytes, CHAT_MAX_UPLOAD_BYTES): %s", path, ce.Message)
		case "unsupported":
			return hint(err, "chatd does not accept %s: %s (upload_types, CHAT_UPLOAD_TYPES, lists what it does)", path, ce.Message)
		case "rate_limited":
			return hint(err, "%s: %s", path, ce.Message)
		}
	}
	return explainChat(err, fs, user, conv)
}

func runDownload(ctx context.Context, a *app, args []string) error {
	cf := newChatFlags("download", "download --user N --id ATTACHMENT [--out PATH] [--resume]",
		"Download an attachment as --user (a member of its conversation) over chatd's\nHTTP API, following an object store's redirect. --out - writes to stdout;\nwithout --out the file gets the attachment's name in the current directory\n(never replacing a file there; a leading dot becomes _).\n--resume continues a partial --out file where it stops (a Range request);\na broken connection is resumed by itself.",
		`chatctl download --user 2 --id ofbjcmujwrisdvlx7lig5xzoiu`,
		`chatctl download --user 2 --id ofbjcmujwrisdvlx7lig5xzoiu --out photo.jpg --resume`)
	id := cf.fs.String("id", "", "the attachment id (message.new's attachments[].id)")
	out := cf.fs.String("out", "", "where to write it (- for stdout; default its name)")
	resume := cf.fs.Bool("resume", false, "continue a partial --out file")
	httpURL := addHTTPFlag(cf.fs)
	if err := cf.parse(a, args); err != nil {
		return err
	}
	if *id == "" {
		return usagef("%s: --id is required (an attachment id from a message)", cf.fs.Name())
	}
	if *resume && (*out == "" || *out == "-") {
		return usagef("%s: --resume needs --out PATH, the partial file", cf.fs.Name())
	}
	api, err := cf.withHTTP(a, *httpURL, true)
	if err != nil {
		return err
	}
	cf.long = true
	return cf.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		if *out == "-" {
			if _, err := c.Download(ctx, *id, a.stdout); err != nil {
				return explainDownload(err, cf.fs, *cf.user, *id)
			}
			return nil
		}
		// Without --out the name is the attachment's; write to a temporary
		// file and rename once its name is known and the bytes are whole.
		path, offset := *out, int64(0)
		flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
		if path == "" {
			path = ".chatctl-download-" + *id
		}
		if *resume {
			if fi, err := os.Stat(path); err == nil {
				offset = fi.Size()
			}
			flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
		}
		f, err := os.OpenFile(path, flags, 0o644)
		if err != nil {
			return fmt.Errorf("%s: %w", cf.fs.Name(), err)
		}
		info, err := c.DownloadFrom(ctx, *id, f, offset)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			if *out == "" {
				os.Remove(path)
			}
			return explainDownload(err, cf.fs, *cf.user, *id)
		}
		if *out == "" {
			// The name is the sender's: it must neither replace a file
			// nor become a dotfile a shell or a tool reads (.profile).
			name := filepath.Base(info.Name)
			if name == "" || name == "." || name == "/" {
				name = *id
			}
			if strings.HasPrefix(name, ".") {
				name = "_" + name[1:]
			}
			if _, err := os.Lstat(name); err == nil {
				os.Remove(path)
				return fmt.Errorf("%s: %s exists and is not overwritten; pass --out PATH to save attachment %s elsewhere (or --out %s to replace it)", cf.fs.Name(), name, *id, name)
			}
			if err := os.Rename(path, name); err != nil {
				return fmt.Errorf("%s: %w", cf.fs.Name(), err)
			}
			path = name
		}
		if *cf.json {
			return printJSON(a.stdout, map[string]any{"path": path, "name": info.Name, "contentType": info.ContentType, "size": info.Size, "written": info.Written})
		}
		fmt.Fprintf(a.stdout, "saved %s (%s, %d bytes)\n", path, info.ContentType, info.Size)
		return nil
	}, api)
}

func explainDownload(err error, fs *flag.FlagSet, user int64, id string) error {
	switch {
	case errors.Is(err, client.ErrNotMember):
		return hint(err, "user %d is not a member of the conversation attachment %s was sent in", user, id)
	case errors.Is(err, client.ErrNotFound):
		return hint(err, "there is no attachment %s (or it is another user's upload not sent yet)", id)
	case errors.Is(err, client.ErrGone):
		return hint(err, "attachment %s was recalled with its message", id)
	}
	return explainChat(err, fs, user, 0)
}
