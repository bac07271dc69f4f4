package server

import (
	"context"
	"fmt"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/config"
	"github.com/chatd/chatd/internal/push"
	"github.com/chatd/chatd/internal/relay"
)

// startPush builds the push hand-off: the VAPID key (set, or kept in the
// data dir like the JWT secret), the device store the Service answers the
// devices API with, and the Pusher (run with the background workers). It
// returns the publisher the store hands committed events to: the hub,
// then the Pusher's hints.
func (s *Server) startPush(ctx context.Context, st config.Settings) (chat.Publisher, error) {
	var (
		keys push.VAPIDKeys
		err  error
	)
	if st.VAPIDPrivateKey != "" {
		keys, err = push.ParseVAPID(st.VAPIDPrivateKey)
	} else {
		keys, err = push.LoadOrCreateVAPID(st.DataDir)
	}
	if err != nil {
		return nil, fmt.Errorf("vapid key: %w", err)
	}
	cfg := push.Config{
		Pool: s.Pool, NodeID: st.NodeID,
		Delay: st.PushDelay, MinInterval: st.PushMinInterval, Preview: st.PushPreview,
		Timeout: st.PushTimeout, QueueSize: st.PushQueueSize, AllowPrivate: st.PushAllowHTTP,
		VAPID: keys, VAPIDSubject: st.VAPIDSubject,
		WebhookURL: st.PushWebhookURL, WebhookSecret: st.PushWebhookSecret,
		Logger: s.log.With("component", "push"), Registerer: s.Registry,
	}
	if len(st.KafkaBrokers) > 0 && st.PushKafkaTopic != "" {
		cfg.KafkaBrokers, cfg.KafkaTopic = st.KafkaBrokers, st.PushKafkaTopic
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := relay.EnsureTopic(tctx, st.KafkaBrokers, st.PushKafkaTopic, pushPartitions); err != nil {
			s.log.Warn("could not ensure the Kafka push topic; pushes to it are retried", "topic", st.PushKafkaTopic, "err", err)
		}
		cancel()
		// Kafka unreachable now: the first push creates it, with the
		// same count (never the broker, with its default).
		cfg.EnsureKafkaTopic = func(ctx context.Context) error {
			_, err := relay.EnsureTopicIfMissing(ctx, st.KafkaBrokers, "chatd-push-"+st.NodeID, st.PushKafkaTopic, pushPartitions)
			return err
		}
	}
	if s.push, err = push.New(cfg); err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	s.devices = push.NewDevices(s.Pool, keys.Public, st.PushAllowHTTP, cfg.HandOff())
	return teePublisher{s.Hub, s.push}, nil
}

// pushPartitions is the partition count chatd creates the push topic with.
const pushPartitions = 12

// teePublisher hands every committed event to each publisher in turn.
type teePublisher []chat.Publisher

func (t teePublisher) Publish(evs ...chat.Event) {
	for _, p := range t {
		p.Publish(evs...)
	}
}

var _ chat.UnsettledPublisher = teePublisher(nil)

// Unsettled tells each publisher that routes by membership (the hub).
func (t teePublisher) Unsettled(ids ...int64) {
	for _, p := range t {
		if u, ok := p.(chat.UnsettledPublisher); ok {
			u.Unsettled(ids...)
		}
	}
}

// Settled tells each publisher that routes by membership (the hub).
func (t teePublisher) Settled(ids ...int64) {
	for _, p := range t {
		if u, ok := p.(chat.UnsettledPublisher); ok {
			u.Settled(ids...)
		}
	}
}

// typingOut hands the typing events of this node's clients to the other
// nodes (the store publishes nothing else that is not stored; what is
// stored reaches them through the outbox). Publishing only queues: typing
// never waits for Kafka.
type typingOut struct{ p *relay.EphemeralPublisher }

func (t typingOut) Publish(evs ...chat.Event) {
	for _, ev := range evs {
		if ev.Type == chat.EventTyping {
			t.p.Publish(ev)
		}
	}
}
