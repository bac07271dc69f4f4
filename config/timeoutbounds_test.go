package config

import (
	"testing"
	"time"
)

// TestASendOrShutdownTimeoutOutsideItsBoundsIsRefusedNamingIt: a send
// timeout of hours holds a connect turn and a database connection that
// long for a send no client still waits for, one of a few milliseconds
// fails every send; a shutdown budget of hours outlives any supervisor's
// stop timeout (systemd's SIGKILL after TimeoutStopSec), one below a
// second drops clients mid-send. Both were taken whatever their size.
func TestASendOrShutdownTimeoutOutsideItsBoundsIsRefusedNamingIt(t *testing.T) {
	checkLoadErrors(t, []loadErrorCase{
		{"send timeout of hours", map[string]string{"CHAT_SEND_TIMEOUT": "100h"},
			[]string{"send_timeout (from env CHAT_SEND_TIMEOUT)", "is not between 100ms and 1m"}},
		{"send timeout of a millisecond", map[string]string{"CHAT_SEND_TIMEOUT": "1ms"},
			[]string{"send_timeout (from env CHAT_SEND_TIMEOUT)", "is not between 100ms and 1m"}},
		{"send timeout of zero", map[string]string{"CHAT_SEND_TIMEOUT": "0s"}, []string{"send_timeout", "must be positive"}},
		{"negative send timeout", map[string]string{"CHAT_SEND_TIMEOUT": "-1s"}, []string{"send_timeout", "must be positive"}},
		{"shutdown budget of hours", map[string]string{"CHAT_SHUTDOWN_TIMEOUT": "100h"},
			[]string{"shutdown_timeout (from env CHAT_SHUTDOWN_TIMEOUT)", "is not between 1s and 10m"}},
		{"shutdown budget of a millisecond", map[string]string{"CHAT_SHUTDOWN_TIMEOUT": "1ms"},
			[]string{"shutdown_timeout (from env CHAT_SHUTDOWN_TIMEOUT)", "is not between 1s and 10m"}},
		{"negative shutdown budget", map[string]string{"CHAT_SHUTDOWN_TIMEOUT": "-1s"}, []string{"shutdown_timeout", "must be positive"}},
	}, nil)
	s := mustLoad(t, nil, map[string]string{"CHAT_SEND_TIMEOUT": "1m", "CHAT_SHUTDOWN_TIMEOUT": "10m"})
	if s.SendTimeout != time.Minute || s.ShutdownTimeout != 10*time.Minute {
		t.Errorf("the upper bounds: send_timeout %v, shutdown_timeout %v", s.SendTimeout, s.ShutdownTimeout)
	}
	s = mustLoad(t, nil, map[string]string{"CHAT_SEND_TIMEOUT": "100ms", "CHAT_SHUTDOWN_TIMEOUT": "1s"})
	if s.SendTimeout != 100*time.Millisecond || s.ShutdownTimeout != time.Second {
		t.Errorf("the lower bounds: send_timeout %v, shutdown_timeout %v", s.SendTimeout, s.ShutdownTimeout)
	}
}
