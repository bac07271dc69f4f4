package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// conversationCommands is the table of "chatctl conversation <sub>".
var conversationCommands = []command{
	{"create", "create a group with an owner, a title and members", runConversationCreate},
	{"direct", "open (or find) the direct conversation of two users", runConversationDirect},
	{"add", "add a member to a group", runConversationAdd},
	{"remove", "remove a member from a group (or leave it)", runConversationRemove},
	{"show", "show a conversation and its members, as one of its members", runConversationShow},
}

func runConversation(ctx context.Context, a *app, args []string) error {
	return subcommands{name: "conversation", usage: "Usage: chatctl conversation <subcommand> [flags]\n\nThese commands write to the database directly (no MQTT); their events go\nto the outbox like chatd's own.\n", example: `chatctl conversation create --owner 1 --title "Team" --members 2,3,4`, cmds: conversationCommands}.run(ctx, a, args)
}

// withService runs fn with the chat service on the database of db (see
// service) and closes the database after it.
func (a *app) withService(ctx context.Context, db dbFlags, fn func(*chat.Service) error) error {
	svc, closeDB, err := a.service(ctx, db)
	if err != nil {
		return err
	}
	defer closeDB(context.WithoutCancel(ctx))
	return fn(svc)
}

// service opens the database and builds the chat service the way chatd
// does, minus the notifier: operator commands bypass MQTT.
func (a *app) service(ctx context.Context, db dbFlags) (*chat.Service, func(context.Context) error, error) {
	pool, closeDB, err := db.open(ctx, a)
	if err != nil {
		return nil, nil, err
	}
	// chatd refuses such a database at start; so does chatctl before it
	// runs this binary's statements on it.
	if err := store.CheckSchema(ctx, pool); err != nil {
		_ = closeDB(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	limits := a.settings.Limits()
	return chat.NewService(store.New(pool, limits), limits), closeDB, nil
}

func runConversationCreate(ctx context.Context, a *app, args []string) error {
	fs := newFlags("conversation create", "conversation create --owner N --title T [--members 2,3,4]",
		"Create a group owned by --owner with the given members; print it as JSON.",
		`chatctl conversation create --owner 1 --title "Team" --members 2,3,4`)
	owner := fs.Int64("owner", 0, "user id of the owner")
	title := fs.String("title", "", "group title")
	membersFlag := fs.String("members", "", "comma-separated user ids of the other members")
	db := addDBFlags(fs)
	if err := parse(a, fs, args); err != nil {
		return err
	}
	if err := requireID(fs, "owner", *owner, "the user id of the group's owner"); err != nil {
		return err
	}
	members, err := parseIDs(fs, "members", *membersFlag)
	if err != nil {
		return err
	}
	return a.withService(ctx, db, func(svc *chat.Service) error {
		conv, err := svc.CreateGroup(ctx, *owner, *title, members)
		if err != nil {
			return explain(ctx, svc, fs, "owner", 0, *owner, 0, err)
		}
		return printJSON(a.stdout, conv)
	})
}

func runConversationDirect(ctx context.Context, a *app, args []string) error {
	fs := newFlags("conversation direct", "conversation direct --user A --peer B",
		"Print the direct conversation of users A and B as JSON, creating it if needed\n(\"created\" says which).",
		"chatctl conversation direct --user 1 --peer 2")
	user := fs.Int64("user", 0, "one user id")
	peer := fs.Int64("peer", 0, "the other user id")
	db := addDBFlags(fs)
	if err := parse(a, fs, args); err != nil {
		return err
	}
	if err := requireIDs(fs, required{"user", *user, "one of the two users"}, required{"peer", *peer, "the other user"}); err != nil {
		return err
	}
	if *user == *peer {
		return usagef("conversation direct: --user and --peer are both %d; a direct conversation needs two different users", *user)
	}
	return a.withService(ctx, db, func(svc *chat.Service) error {
		conv, created, err := svc.OpenDirect(ctx, *user, *peer)
		if err != nil {
			return explain(ctx, svc, fs, "user", 0, *user, *peer, err)
		}
		return printJSON(a.stdout, struct {
			Created      bool              `json:"created"`
			Conversation chat.Conversation `json:"conversation"`
		}{created, conv})
	})
}

// memberFlags are the flags of add and remove.
type memberFlags struct {
	conv, actor, user *int64
	db                dbFlags
}

func parseMemberFlags(a *app, name, about, example string, args []string) (*flag.FlagSet, memberFlags, error) {
	fs := newFlags("conversation "+name, "conversation "+name+" --conversation C --actor A --user U", about, example)
	m := memberFlags{
		conv:  fs.Int64("conversation", 0, "conversation id"),
		actor: fs.Int64("actor", 0, "user id acting: an owner or admin of the conversation (or U itself, to leave)"),
		user:  fs.Int64("user", 0, "user id to "+name),
		db:    addDBFlags(fs),
	}
	if err := parse(a, fs, args); err != nil {
		return fs, m, err
	}
	return fs, m, requireIDs(fs,
		required{"conversation", *m.conv, "the conversation id"},
		required{"actor", *m.actor, "the user performing the change, an owner or admin"},
		required{"user", *m.user, "the user to " + name})
}

func runConversationAdd(ctx context.Context, a *app, args []string) error {
	fs, m, err := parseMemberFlags(a, "add",
		"Add user U to group C as a member, acting as A (its owner or an admin);\nprint the member as JSON. Adding an existing member changes nothing.",
		"chatctl conversation add --conversation 3 --actor 1 --user 5", args)
	if err != nil {
		return err
	}
	return a.withService(ctx, m.db, func(svc *chat.Service) error {
		member, _, err := svc.AddMember(ctx, *m.conv, *m.actor, *m.user)
		if err != nil {
			return explain(ctx, svc, fs, "actor", *m.conv, *m.actor, *m.user, err)
		}
		return printJSON(a.stdout, struct {
			ConversationID int64       `json:"conversationId"`
			Member         chat.Member `json:"member"`
		}{*m.conv, member})
	})
}

func runConversationRemove(ctx context.Context, a *app, args []string) error {
	fs, m, err := parseMemberFlags(a, "remove",
		"Remove user U from group C, acting as A (its owner or an admin; A = U leaves).\nThe owner cannot be removed, only leave.",
		"chatctl conversation remove --conversation 3 --actor 1 --user 5", args)
	if err != nil {
		return err
	}
	return a.withService(ctx, m.db, func(svc *chat.Service) error {
		if err := svc.RemoveMember(ctx, *m.conv, *m.actor, *m.user); err != nil {
			return explain(ctx, svc, fs, "actor", *m.conv, *m.actor, *m.user, err)
		}
		return printJSON(a.stdout, struct {
			ConversationID int64 `json:"conversationId"`
			UserID         int64 `json:"userId"`
			Removed        bool  `json:"removed"`
		}{*m.conv, *m.user, true})
	})
}

func runConversationShow(ctx context.Context, a *app, args []string) error {
	fs := newFlags("conversation show", "conversation show --conversation C --user U",
		"Print conversation C with its members as JSON, as seen by its member U.",
		"chatctl conversation show --conversation 3 --user 1")
	conv := fs.Int64("conversation", 0, "conversation id")
	user := fs.Int64("user", 0, "a member of the conversation")
	db := addDBFlags(fs)
	if err := parse(a, fs, args); err != nil {
		return err
	}
	if err := requireIDs(fs, required{"conversation", *conv, "the conversation id"}, required{"user", *user, "a member of the conversation"}); err != nil {
		return err
	}
	return a.withService(ctx, db, func(svc *chat.Service) error {
		c, err := svc.GetConversation(ctx, *conv, *user)
		if err != nil {
			return explain(ctx, svc, fs, "user", *conv, *user, 0, err)
		}
		return printJSON(a.stdout, c)
	})
}

// hinted is an error whose text says what happened and what to do next;
// the chat error stays reachable with errors.Is/As.
type hinted struct {
	msg string
	err error
}

func (h *hinted) Error() string { return h.msg }
func (h *hinted) Unwrap() error { return h.err }

func hint(err error, format string, args ...any) error {
	return &hinted{msg: fmt.Sprintf(format, args...), err: err}
}

// explain turns a chat error of a conversation command into a message
// saying what to do next. It looks at the membership to tell "the
// conversation does not exist" from "the actor is not a member" from "the
// target is not a member". actor is the acting user, given by flag
// actorFlag; user the target (or the peer for direct), 0 when there is none.
func explain(ctx context.Context, svc *chat.Service, fs *flag.FlagSet, actorFlag string, conv, actor, user int64, err error) error {
	cmd := fs.Name() // "conversation add"
	help := fmt.Sprintf("see `chatctl %s --help`", cmd)
	switch chat.ErrorCode(err) {
	case chat.CodeUnavailable:
		return hint(err, "the database is unavailable (%v): check that PostgreSQL is running and that --database-url / CHAT_DATABASE_URL (or --data-dir) points at it, then rerun", err)
	case chat.CodeInvalid, chat.CodeTooLarge:
		return hint(err, "%s; %s", chat.ErrorMessage(err), help)
	case chat.CodeMemberCap:
		if conv == 0 {
			return hint(err, "%s: create a smaller group, or raise max_members (CHAT_MAX_MEMBERS) for chatd and chatctl alike", chat.ErrorMessage(err))
		}
		return hint(err, "conversation %d is full (%s): remove someone first with `chatctl conversation remove --conversation %d --actor %d --user ID`, or raise max_members (CHAT_MAX_MEMBERS)",
			conv, chat.ErrorMessage(err), conv, actor)
	}
	if conv == 0 {
		return fmt.Errorf("%s: %w", cmd, err)
	}

	members, merr := svc.Store.Members(ctx, conv)
	if merr != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	switch code := chat.ErrorCode(err); {
	case code == chat.CodeNotFound || code == chat.CodeNotMember:
		switch {
		case len(members) == 0:
			return hint(err, "conversation %d does not exist (or has no members left): create one with `chatctl conversation create --owner %d --title TITLE --members 2,3`", conv, actor)
		case !slices.Contains(members, actor):
			return hint(err, "user %d is not a member of conversation %d (its members: %s): pass one of its members as --%s (an owner or admin to manage members), or add user %d first with `chatctl conversation add --conversation %d --actor OWNER --user %d`",
				actor, conv, joinIDs(members), actorFlag, actor, conv, actor)
		case user != 0 && !slices.Contains(members, user):
			return hint(err, "user %d is not a member of conversation %d: add them first with `chatctl conversation add --conversation %d --actor %d --user %d`",
				user, conv, conv, actor, user)
		}
	case code == chat.CodeForbidden:
		c, gerr := svc.Store.GetConversation(ctx, conv, actor)
		if gerr != nil {
			break
		}
		if c.Type == chat.Direct {
			return hint(err, "conversation %d is a direct conversation, whose two members never change: create a group with `chatctl conversation create --owner %d --title TITLE --members ...` instead", conv, actor)
		}
		var owner int64
		var actorRole chat.Role
		for _, m := range c.Members {
			if m.Role == chat.RoleOwner {
				owner = m.UserID
			}
			if m.UserID == actor {
				actorRole = m.Role
			}
		}
		if user == owner && actor != owner {
			return hint(err, "user %d owns conversation %d and cannot be removed; only they can leave, with --%s %d --user %d", owner, conv, actorFlag, owner, owner)
		}
		if actorRole == chat.RoleMember && owner != 0 {
			return hint(err, "user %d is a plain member of conversation %d; only its owner (user %d) or an admin can do this: rerun with --%s %d", actor, conv, owner, actorFlag, owner)
		}
		return hint(err, "%s; %s", chat.ErrorMessage(err), help)
	}
	var ce *chat.Error
	if errors.As(err, &ce) {
		return hint(err, "%s; %s", chat.ErrorMessage(err), help)
	}
	return fmt.Errorf("%s: %w", cmd, err)
}
