package relay

import (
	"reflect"
	"slices"
	"sync"
	"time"
)

// echoWindow is how long after kafka-go first reported a failure it may
// report the same error again: at once, from the goroutine that received
// it from the one that logged it.
const echoWindow = time.Second

// echoes are the errors kafka-go reported (and the consumer counted) that
// it may report again: the consumer group's failures, which the reader
// logs a second time and FetchMessage may return a third.
type echoes struct {
	mu   sync.Mutex
	errs []echo
}

type echo struct {
	err  error
	at   time.Time
	left int // later reports of it still expected
}

// add remembers err, counted now, for two echoes.
func (e *echoes) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	e.errs = slices.DeleteFunc(e.errs, func(x echo) bool { return now.Sub(x.at) > echoWindow })
	e.errs = append(e.errs, echo{err: err, at: now, left: 2})
}

// take reports whether err is an echo of an error already counted,
// consuming it.
func (e *echoes) take(err error) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	for i := range e.errs {
		x := &e.errs[i]
		if x.left > 0 && now.Sub(x.at) <= echoWindow && sameError(x.err, err) {
			x.left--
			return true
		}
	}
	return false
}

// sameError reports whether a and b are one error value: the same pointer,
// or equal codes (kafka.Error). Values that == may panic on (structs,
// arrays) are never the same.
func sameError(a, b error) bool {
	t := reflect.TypeOf(a)
	if t != reflect.TypeOf(b) || !t.Comparable() {
		return false
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Array, reflect.Interface:
		return false
	}
	return a == b
}
