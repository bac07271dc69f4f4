package store

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// int8s and texts are []int64 and []string parameters that pgx's array
// codec encodes without an allocation per element. pgx wraps a plain
// slice in a FlatArray, whose Index puts each element in an interface:
// a heap copy of every string and of every int64 past 255, several per
// change on each group commit. Index here hands out a pointer into the
// slice instead, which an interface holds as is, and the element's
// valuer reads it in place. A nil slice is SQL NULL, as a FlatArray's.
//
// uuids is a []string of UUIDs (clientMsgIds, canonical once validated)
// for a uuid[] parameter: pgx has no binary plan for a string as a uuid,
// so a plain []string goes as text, three allocations per element; each
// element here is parsed into its 16 bytes without one.
type (
	int8s []int64
	texts []string
	uuids []string

	int8Elem int64
	textElem string
	uuidElem string
)

func (e *int8Elem) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*e), Valid: true}, nil
}

func (e *textElem) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*e), Valid: true}, nil
}

func (e *uuidElem) UUIDValue() (pgtype.UUID, error) {
	u, err := uuid.Parse(string(*e))
	if err != nil {
		return pgtype.UUID{}, fmt.Errorf("encode uuid %q: %w", string(*e), err)
	}
	return pgtype.UUID{Bytes: u, Valid: true}, nil
}

func (a int8s) Dimensions() []pgtype.ArrayDimension { return dimensions(len(a), a == nil) }
func (a int8s) Index(i int) any                     { return (*int8Elem)(&a[i]) }
func (a int8s) IndexType() any                      { return (*int8Elem)(nil) }

func (a texts) Dimensions() []pgtype.ArrayDimension { return dimensions(len(a), a == nil) }
func (a texts) Index(i int) any                     { return (*textElem)(&a[i]) }
func (a texts) IndexType() any                      { return (*textElem)(nil) }

func (a uuids) Dimensions() []pgtype.ArrayDimension { return dimensions(len(a), a == nil) }
func (a uuids) Index(i int) any                     { return (*uuidElem)(&a[i]) }
func (a uuids) IndexType() any                      { return (*uuidElem)(nil) }

func dimensions(n int, null bool) []pgtype.ArrayDimension {
	if null {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(n), LowerBound: 1}}
}
