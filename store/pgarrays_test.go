package store

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// TestArrayParametersEncodeAsPlainSlicesWithoutAnAllocationPerElement:
// the group commit's int8s, texts and uuids encode to the bytes pgx
// writes for the plain slices (uuids: for the parsed UUIDs in binary),
// NULL for nil, in both formats, and a hundred elements cost no hundred
// allocations.
func TestArrayParametersEncodeAsPlainSlicesWithoutAnAllocationPerElement(t *testing.T) {
	m := pgtype.NewMap()
	ids := make([]int64, 100)
	bodies := make([]string, 100)
	for i := range ids {
		ids[i] = int64(1000 + i)
		bodies[i] = "body " + strconv.Itoa(i) + ` with "quotes", {braces} and \ `
	}
	bodies[3] = ""
	for _, c := range []struct {
		oid         uint32
		plain, ours any
	}{
		{pgtype.Int8ArrayOID, ids, int8s(ids)},
		{pgtype.TextArrayOID, bodies, texts(bodies)},
		{pgtype.Int8ArrayOID, []int64(nil), int8s(nil)},
		{pgtype.TextArrayOID, []string(nil), texts(nil)},
		{pgtype.Int8ArrayOID, []int64{}, int8s{}},
	} {
		for _, format := range []int16{pgtype.BinaryFormatCode, pgtype.TextFormatCode} {
			want, err := m.Encode(c.oid, format, c.plain, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Encode(c.oid, format, c.ours, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				t.Fatalf("%T in format %d: %q, as a plain slice %q", c.ours, format, got, want)
			}
		}
	}
	// A uuid[] as pgx encodes the UUIDs parsed (binary; a plain []string
	// has no binary plan) and the plain strings (text).
	msgIDs := make([]string, 100)
	parsed := make([]pgtype.UUID, 100)
	for i := range msgIDs {
		u := uuid.New()
		msgIDs[i], parsed[i] = u.String(), pgtype.UUID{Bytes: u, Valid: true}
	}
	for _, c := range []struct {
		format      int16
		plain, ours any
	}{
		{pgtype.BinaryFormatCode, parsed, uuids(msgIDs)},
		{pgtype.TextFormatCode, msgIDs, uuids(msgIDs)},
		{pgtype.BinaryFormatCode, []pgtype.UUID(nil), uuids(nil)},
		{pgtype.TextFormatCode, []string{}, uuids{}},
	} {
		want, err := m.Encode(pgtype.UUIDArrayOID, c.format, c.plain, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Encode(pgtype.UUIDArrayOID, c.format, c.ours, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Fatalf("uuids(%d) in format %d: %q, want %q", len(c.ours.(uuids)), c.format, got, want)
		}
	}
	if _, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, uuids{"not a uuid"}, nil); err == nil {
		t.Fatal("uuids{\"not a uuid\"} encoded without an error")
	}
	buf := make([]byte, 0, 64<<10)
	for _, c := range []struct {
		oid uint32
		v   any
	}{{pgtype.Int8ArrayOID, int8s(ids)}, {pgtype.TextArrayOID, texts(bodies)}, {pgtype.UUIDArrayOID, uuids(msgIDs)}} {
		// The array's dimensions and the boxing of the argument itself.
		if n := testing.AllocsPerRun(20, func() { _, _ = m.Encode(c.oid, pgtype.BinaryFormatCode, c.v, buf[:0]) }); n > 5 {
			t.Errorf("%T of 100: %v allocations per encoding, want at most 5", c.v, n)
		}
	}
}
