package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/segmentio/kafka-go"
)

// EnsureTopic creates topic with the given number of partitions on the
// cluster behind brokers unless it exists already (an existing topic is
// left as it is, whatever its partition count). The replication factor is
// min(3, number of brokers). A topic a write has the broker create gets
// the broker's default partition count: call it at start-up to choose, and
// give the Relay the count (Config.Partitions), which creates the topic
// before its first write when it is still missing then.
//
// The partition count is part of the ordering contract: a conversation maps
// to partition hash(conversationId) mod partitions, so adding partitions
// later moves conversations and breaks their order across the change.
func EnsureTopic(ctx context.Context, brokers []string, topic string, partitions int) error {
	if len(brokers) == 0 {
		return errors.New("ensure topic: no brokers")
	}
	if partitions < 1 {
		return fmt.Errorf("ensure topic %s: partitions must be positive, got %d", topic, partitions)
	}
	var d kafka.Dialer
	var conn *kafka.Conn
	var errs []error
	for _, b := range brokers {
		c, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			conn = c
			break
		}
		errs = append(errs, err)
	}
	if conn == nil {
		return fmt.Errorf("ensure topic %s: dial brokers: %w", topic, errors.Join(errs...))
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}

	bs, err := conn.Brokers()
	if err != nil {
		return fmt.Errorf("ensure topic %s: list brokers: %w", topic, err)
	}
	controller, err := conn.Controller()
	if err != nil {
		return fmt.Errorf("ensure topic %s: find controller: %w", topic, err)
	}
	cc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(controller.Host, strconv.Itoa(controller.Port)))
	if err != nil {
		return fmt.Errorf("ensure topic %s: dial controller: %w", topic, err)
	}
	defer cc.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = cc.SetDeadline(dl)
	}
	// CreateTopics treats "already exists" as success.
	err = cc.CreateTopics(kafka.TopicConfig{
		Topic:             topic,
		NumPartitions:     partitions,
		ReplicationFactor: min(3, max(1, len(bs))),
	})
	if err != nil {
		return fmt.Errorf("ensure topic %s: create: %w", topic, err)
	}
	return nil
}
