package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// DBCheck is what -verify-db found in chatd's database.
type DBCheck struct {
	Conversations int     `json:"conversations"`
	Rows          int64   `json:"rows"`
	Gapless       bool    `json:"gapless"` // every conversation holds exactly seqs 1..last_seq
	BadConvs      []int64 `json:"badConversations,omitempty"`
	MissingAcked  int64   `json:"missingAcked"` // acked clientMsgIds not stored
	Duplicated    int64   `json:"duplicated"`   // clientMsgIds stored more than once
}

// verifyDB checks the bench's conversations in chatd's database: seqs are
// 1..last_seq without holes, and every acknowledged message is stored once.
func verifyDB(ctx context.Context, url string, convs []int64, acked []string) (*DBCheck, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("verify-db: connect: %w", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT c.id, c.last_seq, count(m.seq), coalesce(min(m.seq), 0), coalesce(max(m.seq), 0)
		FROM conversation c LEFT JOIN message m ON m.conversation_id = c.id
		WHERE c.id = ANY($1)
		GROUP BY c.id, c.last_seq`, convs)
	if err != nil {
		return nil, fmt.Errorf("verify-db: query seqs: %w", err)
	}
	chk := &DBCheck{Gapless: true}
	for rows.Next() {
		var id, last, n, lo, hi int64
		if err := rows.Scan(&id, &last, &n, &lo, &hi); err != nil {
			rows.Close()
			return nil, fmt.Errorf("verify-db: %w", err)
		}
		chk.Conversations++
		chk.Rows += n
		if n != last || hi != last || (n > 0 && lo != 1) {
			chk.Gapless = false
			if len(chk.BadConvs) < 10 {
				chk.BadConvs = append(chk.BadConvs, id)
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("verify-db: %w", err)
	}
	if chk.Conversations != len(convs) {
		chk.Gapless = false
	}
	for len(acked) > 0 {
		n := min(len(acked), 10000)
		var found, distinct int64
		if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT client_msg_id) FROM message WHERE client_msg_id = ANY($1::uuid[])`,
			acked[:n]).Scan(&found, &distinct); err != nil {
			return nil, fmt.Errorf("verify-db: query messages: %w", err)
		}
		chk.MissingAcked += int64(n) - distinct
		chk.Duplicated += found - distinct
		acked = acked[n:]
	}
	return chk, nil
}
