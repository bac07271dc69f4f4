package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/client"
)

// People and groups, acting as a user over MQTT RPC like the Go client:
// profile, settings, block, group and search.

func runProfile(ctx context.Context, a *app, args []string) error {
	cf := newChatFlags("profile", "profile --user N [--name NAME [--about TEXT] [--avatar URL | --avatar-file PATH]] [--of IDS] [--json]",
		"Show --user's own profile and settings; with --name, set the profile first;\nwith --of, show the profiles of those users (only users who share a\nconversation with --user are shown). --avatar-file uploads a picture (JPEG,\nPNG, GIF or WebP) to chatd's HTTP API (--http) and makes it the avatar.",
		`chatctl profile --user 1 --name "Ann Lee" --about "climbs on Sundays"`,
		`chatctl profile --user 1 --name "Ann Lee" --avatar-file me.jpg`,
		"chatctl profile --user 2 --of 1,3")
	name := cf.fs.String("name", "", "display name to set (1-64 characters)")
	about := cf.fs.String("about", "", "about text to set (with --name; \"-\" clears it)")
	avatar := cf.fs.String("avatar", "", "avatar https URL to set (with --name; \"-\" clears it)")
	avatarFile := cf.fs.String("avatar-file", "", "a picture to upload and set as the avatar (with --name)")
	httpURL := addHTTPFlag(cf.fs)
	of := cf.fs.String("of", "", "comma-separated user ids whose profiles to show")
	if err := cf.parse(a, args); err != nil {
		return err
	}
	if *name == "" && (*about != "" || *avatar != "" || *avatarFile != "") {
		return usagef("%s: --about, --avatar and --avatar-file are set together with --name", cf.fs.Name())
	}
	if *avatar != "" && *avatarFile != "" {
		return usagef("%s: give --avatar or --avatar-file, not both", cf.fs.Name())
	}
	if err := checkFiles(cf.fs, "avatar-file", *avatarFile); err != nil {
		return err
	}
	var ids []int64
	if *of != "" {
		var err error
		if ids, err = parseIDs(cf.fs, "of", *of); err != nil {
			return err
		}
	}
	api, err := cf.withHTTP(a, *httpURL, uploadsOverHTTP(a, *avatarFile))
	if err != nil {
		return err
	}
	cf.long = *avatarFile != ""
	return cf.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		if *of != "" {
			ps, err := c.Users(ctx, ids)
			if err != nil {
				return cf.explain(err, 0)
			}
			if *cf.json {
				return printJSON(a.stdout, map[string]any{"users": ps})
			}
			for _, p := range ps {
				printProfile(a.stdout, p)
			}
			// An id given twice is answered once.
			if asked := len(slices.Compact(slices.Sorted(slices.Values(ids)))); len(ps) < asked {
				fmt.Fprintf(a.stdout, "(%d of %d users share no conversation with user %d, or do not exist)\n", asked-len(ps), asked, *cf.user)
			}
			return nil
		}
		if *name != "" {
			u := client.ProfileUpdate{DisplayName: *name, About: clearable(*about), AvatarURL: clearable(*avatar)}
			if *avatarFile != "" {
				id, err := uploadAvatar(ctx, c, cf.fs, *cf.user, *avatarFile)
				if err != nil {
					return err
				}
				u.AvatarUploadID = &id
			}
			if _, err := c.SetProfile(ctx, u); err != nil {
				return cf.explain(err, 0)
			}
		}
		me, err := c.Me(ctx)
		if err != nil {
			return cf.explain(err, 0)
		}
		if *cf.json {
			return printJSON(a.stdout, me)
		}
		printProfile(a.stdout, me.Profile)
		fmt.Fprintf(a.stdout, "  read receipts %s, presence %s\n", onOff(me.Settings.ReadReceipts), onOff(me.Settings.Presence))
		return nil
	}, api)
}

// uploadAvatar uploads the picture at path as user's avatar upload and
// returns its id, for ProfileUpdate or GroupUpdate.AvatarUploadID.
func uploadAvatar(ctx context.Context, c *client.Client, fs *flag.FlagSet, user int64, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", fs.Name(), err)
	}
	defer f.Close()
	att, err := c.UploadAvatar(ctx, path, f)
	if err != nil {
		return "", explainUpload(err, fs, user, 0, path)
	}
	return att.ID, nil
}

// clearable: "" keeps what is stored (nil), "-" clears it.
func clearable(s string) *string {
	switch s {
	case "":
		return nil
	case "-":
		empty := ""
		return &empty
	}
	return &s
}

func printProfile(w io.Writer, p client.Profile) {
	name := p.DisplayName
	if name == "" {
		name = "(no name set)"
	}
	fmt.Fprintf(w, "user %d: %s\n", p.ID, name)
	if p.About != "" {
		fmt.Fprintf(w, "  about: %s\n", oneLine(p.About))
	}
	if p.Avatar != nil {
		fmt.Fprintf(w, "  avatar: %s\n", *p.Avatar)
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func runSettings(ctx context.Context, a *app, args []string) error {
	cf := newChatFlags("settings", "settings --user N [--read-receipts on|off] [--presence on|off] [--json]",
		"Show --user's privacy settings, changing the ones given first. Read receipts\noff: nobody learns what the user read, and the user learns nobody's. Presence\noff: the same for online state and last seen.",
		"chatctl settings --user 1 --read-receipts off")
	rr := cf.fs.String("read-receipts", "", "on or off")
	pr := cf.fs.String("presence", "", "on or off")
	if err := cf.parse(a, args); err != nil {
		return err
	}
	var u client.SettingsUpdate
	for flagName, dst := range map[string]**bool{"read-receipts": &u.ReadReceipts, "presence": &u.Presence} {
		v := map[string]string{"read-receipts": *rr, "presence": *pr}[flagName]
		switch v {
		case "":
		case "on", "off":
			b := v == "on"
			*dst = &b
		default:
			return usagef("%s: --%s must be on or off, not %q", cf.fs.Name(), flagName, v)
		}
	}
	return cf.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		var st client.Settings
		var err error
		if u.ReadReceipts != nil || u.Presence != nil {
			st, err = c.SetSettings(ctx, u)
		} else {
			st, err = c.Settings(ctx)
		}
		if err != nil {
			return cf.explain(err, 0)
		}
		if *cf.json {
			return printJSON(a.stdout, st)
		}
		fmt.Fprintf(a.stdout, "user %d: read receipts %s, presence %s\n", *cf.user, onOff(st.ReadReceipts), onOff(st.Presence))
		return nil
	})
}

func runBlock(ctx context.Context, a *app, args []string) error {
	cf := newChatFlags("block", "block --user N [--peer M [--remove]] [--json]",
		"Block --peer for --user (with --remove, unblock); without --peer, list whom\n--user blocked. A blocked user cannot open or write into a direct\nconversation with the blocker, nor add them to a group, and sees of the\nblocker the name alone: no presence, avatar or about.",
		"chatctl block --user 1 --peer 2", "chatctl block --user 1 --peer 2 --remove", "chatctl block --user 1")
	peer := cf.fs.Int64("peer", 0, "the user to block or unblock")
	remove := cf.fs.Bool("remove", false, "unblock instead")
	if err := cf.parse(a, args); err != nil {
		return err
	}
	if err := optionalIDs(cf.fs, "peer"); err != nil {
		return err
	}
	if *remove && *peer == 0 {
		return usagef("%s: --remove needs --peer", cf.fs.Name())
	}
	return cf.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		var err error
		switch {
		case *peer != 0 && *remove:
			err = c.Unblock(ctx, *peer)
		case *peer != 0:
			err = c.Block(ctx, *peer)
		}
		if err != nil {
			return cf.explain(err, 0)
		}
		bs, err := c.Blocks(ctx)
		if err != nil {
			return cf.explain(err, 0)
		}
		if *cf.json {
			if bs == nil {
				bs = []client.Block{}
			}
			return printJSON(a.stdout, map[string]any{"blocked": bs})
		}
		if len(bs) == 0 {
			fmt.Fprintf(a.stdout, "user %d blocks nobody\n", *cf.user)
		}
		for _, b := range bs {
			fmt.Fprintf(a.stdout, "user %d blocks user %d (since %s)\n", *cf.user, b.UserID, b.CreatedAt.Format(time.RFC3339))
		}
		return nil
	})
}

// groupCommands is the table of "chatctl group <sub>".
var groupCommands = []command{
	{"update", "rename a group, set its about, avatar or who reads the history", runGroupUpdate},
	{"members", "list the members with roles and join times", runGroupMembers},
	{"add", "add a member (--admin: as an admin, the owner only)", runGroupAdd},
	{"remove", "remove a member, or leave (--member = --user)", runGroupRemove},
	{"role", "make a member an admin or a plain member (the owner only)", runGroupRole},
	{"owner", "transfer ownership to a member (the owner only)", runGroupOwner},
}

func runGroup(ctx context.Context, a *app, args []string) error {
	return subcommands{name: "group", usage: "Usage: chatctl group <subcommand> --user N --conversation C [flags]\n\nManage a group as one of its members, over MQTT like a client.\n", example: `chatctl group update --user 1 --conversation 3 --title "Crag crew"`, cmds: groupCommands}.run(ctx, a, args)
}

// groupFlags are the flags every group subcommand has.
type groupFlags struct {
	chat chatFlags
	conv *int64
}

func addGroupFlags(fs *flag.FlagSet) groupFlags {
	return groupFlags{chat: addChatFlags(fs), conv: fs.Int64("conversation", 0, "the group's conversation id")}
}

// with is chatFlags.with after checking --conversation.
func (g groupFlags) with(ctx context.Context, a *app, fn func(context.Context, *client.Client) error, opts ...func(*client.Config)) error {
	if err := requireID(g.chat.fs, "conversation", *g.conv, "the group's conversation id"); err != nil {
		return err
	}
	return g.chat.with(ctx, a, fn, opts...)
}

// explain is explainGroup for --user in the group.
func (g groupFlags) explain(err error) error {
	return explainGroup(err, g.chat.fs, *g.chat.user, *g.conv)
}

// explainGroup adds what the roles allow to explainChat.
func explainGroup(err error, fs *flag.FlagSet, user, conv int64) error {
	if err != nil && strings.Contains(err.Error(), "forbidden") {
		return hint(err, "%v: user %d's role in conversation %d does not allow this (see `chatctl group members --user %d --conversation %d`); the owner or an admin renames and adds, only the owner changes roles and transfers ownership", err, user, conv, user, conv)
	}
	return explainChat(err, fs, user, conv)
}

func runGroupUpdate(ctx context.Context, a *app, args []string) error {
	fs := newFlags("group update", "group update --user N --conversation C [--title T] [--about A] [--avatar URL | --avatar-file PATH] [--history joined|all]",
		"Change a group's settings as --user (owner or admin; --history the owner only)\nand print the conversation. --avatar - removes the avatar; --avatar-file\nuploads a picture (JPEG, PNG, GIF or WebP) to chatd's HTTP API (--http)\nand makes it the avatar.",
		`chatctl group update --user 1 --conversation 3 --title "Crag crew" --history all`,
		`chatctl group update --user 1 --conversation 3 --avatar-file crew.png`)
	g := addGroupFlags(fs)
	title := fs.String("title", "", "new title")
	about := fs.String("about", "", "new about text (\"-\" clears it)")
	avatar := fs.String("avatar", "", "new avatar https URL (\"-\" removes it)")
	avatarFile := fs.String("avatar-file", "", "a picture to upload and set as the group's avatar")
	httpURL := addHTTPFlag(fs)
	history := fs.String("history", "", "what members added later read: joined (from their join) or all")
	if err := parse(a, fs, args); err != nil {
		return err
	}
	if *avatar != "" && *avatarFile != "" {
		return usagef("%s: give --avatar or --avatar-file, not both", fs.Name())
	}
	if err := checkFiles(fs, "avatar-file", *avatarFile); err != nil {
		return err
	}
	u := client.GroupUpdate{About: clearable(*about), AvatarURL: clearable(*avatar)}
	if *title != "" {
		u.Title = title
	}
	if *history != "" {
		if *history != chat.HistoryJoined && *history != chat.HistoryAll {
			return usagef("%s: --history must be joined or all", fs.Name())
		}
		u.HistoryVisible = history
	}
	if u.Title == nil && u.About == nil && u.AvatarURL == nil && *avatarFile == "" && u.HistoryVisible == nil {
		return usagef("%s: give at least one of --title, --about, --avatar, --avatar-file, --history", fs.Name())
	}
	api, err := g.chat.withHTTP(a, *httpURL, uploadsOverHTTP(a, *avatarFile))
	if err != nil {
		return err
	}
	g.chat.long = *avatarFile != ""
	return g.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		if *avatarFile != "" {
			id, err := uploadAvatar(ctx, c, fs, *g.chat.user, *avatarFile)
			if err != nil {
				return err
			}
			u.AvatarUploadID = &id
		}
		conv, err := c.UpdateGroup(ctx, *g.conv, u)
		if err != nil {
			return g.explain(err)
		}
		return printJSON(a.stdout, conv)
	}, api)
}

func runGroupMembers(ctx context.Context, a *app, args []string) error {
	fs := newFlags("group members", "group members --user N --conversation C [--json]",
		"List the group's members: the owner, admins, then members by join time.",
		"chatctl group members --user 1 --conversation 3")
	g := addGroupFlags(fs)
	if err := parse(a, fs, args); err != nil {
		return err
	}
	return g.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		var all []client.Member
		cursor := ""
		for range 1000 {
			p, err := c.Members(ctx, *g.conv, 500, cursor)
			if err != nil {
				return g.explain(err)
			}
			all = append(all, p.Members...)
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		if *g.chat.json {
			return printJSON(a.stdout, map[string]any{"members": all})
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "USER\tROLE\tJOINED")
		for _, m := range all {
			fmt.Fprintf(tw, "%d\t%s\t%s\n", m.UserID, m.Role, m.JoinedAt.Format(time.RFC3339))
		}
		return tw.Flush()
	})
}

func memberFlag(fs *flag.FlagSet) *int64 {
	return fs.Int64("member", 0, "the member the change is about")
}

// parseMember parses a group subcommand's flags and checks --member, what
// the subcommand needs it for.
func parseMember(a *app, fs *flag.FlagSet, args []string, member *int64, what string) error {
	if err := parse(a, fs, args); err != nil {
		return err
	}
	return requireID(fs, "member", *member, what)
}

func runGroupAdd(ctx context.Context, a *app, args []string) error {
	fs := newFlags("group add", "group add --user N --conversation C --member M [--admin]",
		"Add --member to the group as --user (owner or admin; --admin: the owner only).",
		"chatctl group add --user 1 --conversation 3 --member 5")
	g := addGroupFlags(fs)
	member := memberFlag(fs)
	admin := fs.Bool("admin", false, "add as an admin")
	if err := parseMember(a, fs, args, member, "the user to add"); err != nil {
		return err
	}
	return g.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		var m client.Member
		var err error
		if *admin {
			m, err = c.AddAdmin(ctx, *g.conv, *member)
		} else {
			m, err = c.AddMember(ctx, *g.conv, *member)
		}
		if err != nil {
			return g.explain(err)
		}
		return printJSON(a.stdout, m)
	})
}

func runGroupRemove(ctx context.Context, a *app, args []string) error {
	fs := newFlags("group remove", "group remove --user N --conversation C --member M",
		"Remove --member as --user (the owner anyone, an admin plain members); with\n--member equal to --user, leave. When the owner leaves, the longest-standing\nadmin (else member) owns the group.",
		"chatctl group remove --user 1 --conversation 3 --member 5",
		"chatctl group remove --user 5 --conversation 3 --member 5")
	g := addGroupFlags(fs)
	member := memberFlag(fs)
	if err := parseMember(a, fs, args, member, "the member to remove (--user's own id to leave)"); err != nil {
		return err
	}
	return g.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		if err := c.RemoveMember(ctx, *g.conv, *member); err != nil {
			return g.explain(err)
		}
		if *member == *g.chat.user {
			fmt.Fprintf(a.stdout, "user %d left conversation %d\n", *member, *g.conv)
		} else {
			fmt.Fprintf(a.stdout, "user %d removed user %d from conversation %d\n", *g.chat.user, *member, *g.conv)
		}
		return nil
	})
}

func runGroupRole(ctx context.Context, a *app, args []string) error {
	fs := newFlags("group role", "group role --user N --conversation C --member M --role admin|member",
		"Make --member an admin or a plain member, as the owner --user.",
		"chatctl group role --user 1 --conversation 3 --member 5 --role admin")
	g := addGroupFlags(fs)
	member := memberFlag(fs)
	role := fs.String("role", "", "admin or member")
	if err := parseMember(a, fs, args, member, "the member whose role changes"); err != nil {
		return err
	}
	if *role != "admin" && *role != "member" {
		return usagef("%s: --role must be admin or member", fs.Name())
	}
	return g.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		m, err := c.SetRole(ctx, *g.conv, *member, *role)
		if err != nil {
			return g.explain(err)
		}
		return printJSON(a.stdout, m)
	})
}

func runGroupOwner(ctx context.Context, a *app, args []string) error {
	fs := newFlags("group owner", "group owner --user N --conversation C --member M",
		"Transfer ownership to --member, as the owner --user, who becomes an admin.",
		"chatctl group owner --user 1 --conversation 3 --member 5")
	g := addGroupFlags(fs)
	member := memberFlag(fs)
	if err := parseMember(a, fs, args, member, "the new owner"); err != nil {
		return err
	}
	return g.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		if err := c.TransferOwnership(ctx, *g.conv, *member); err != nil {
			return g.explain(err)
		}
		fmt.Fprintf(a.stdout, "user %d owns conversation %d now\n", *member, *g.conv)
		return nil
	})
}

func runSearch(ctx context.Context, a *app, args []string) error {
	cf := newChatFlags("search", "search --user N --query Q [--conversation C] [--sender S] [--limit 20] [--cursor X] [--json]",
		"Search the messages --user may read, most relevant then newest first; matches\nare shown in [brackets]. Chinese, Japanese and Korean are found inside\nsentences; other words of three letters or more inside words.",
		`chatctl search --user 1 --query "北京"`, `chatctl search --user 1 --query meeting --conversation 3`)
	q := cf.fs.String("query", "", "what to find")
	conv := cf.fs.Int64("conversation", 0, "only this conversation")
	sender := cf.fs.Int64("sender", 0, "only messages of this user")
	limit := cf.fs.Int("limit", 20, "how many hits (at most 50)")
	cursor := cf.fs.String("cursor", "", "continue after a previous page (its next cursor)")
	if err := cf.parse(a, args); err != nil {
		return err
	}
	if strings.TrimSpace(*q) == "" {
		return usagef("%s: --query is required", cf.fs.Name())
	}
	if err := optionalIDs(cf.fs, "conversation", "sender"); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("%s: --limit must not be negative (at most 50 hits a page)", cf.fs.Name())
	}
	return cf.with(ctx, a, func(ctx context.Context, c *client.Client) error {
		page, err := c.Search(ctx, *q, client.SearchOptions{ConversationID: *conv, SenderID: *sender, Limit: *limit, Cursor: *cursor})
		if err != nil {
			return cf.explain(err, *conv)
		}
		if *cf.json {
			return printJSON(a.stdout, page)
		}
		if len(page.Results) == 0 {
			fmt.Fprintf(a.stdout, "nothing found for %q\n", *q)
		}
		for _, h := range page.Results {
			fmt.Fprintf(a.stdout, "[conv %d #%d] user %d: %s\n", h.ConversationID, h.Seq, h.SenderID, bracketed(h.Snippet, h.Highlights))
		}
		if page.NextCursor != "" {
			fmt.Fprintf(a.stdout, "(more: --cursor %s)\n", page.NextCursor)
		}
		return nil
	})
}

// bracketed marks the highlighted ranges (code points) of s with [ ].
func bracketed(s string, hs [][2]int) string {
	rs := []rune(s)
	var b strings.Builder
	at := 0
	for _, h := range hs {
		if h[0] < at || h[1] > len(rs) || h[0] >= h[1] {
			continue
		}
		b.WriteString(oneLine(string(rs[at:h[0]])) + "[" + oneLine(string(rs[h[0]:h[1]])) + "]")
		at = h[1]
	}
	b.WriteString(oneLine(string(rs[at:])))
	return b.String()
}
