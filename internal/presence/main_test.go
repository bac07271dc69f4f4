package presence_test

import (
	"testing"

	"github.com/chatd/chatd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
