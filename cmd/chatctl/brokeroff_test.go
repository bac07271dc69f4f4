package main

import "testing"

// TestWithMQTTAddrOffChatctlUsesTheWebSocketOrSaysWhatToPass: with
// chatd's mqtt_addr off, chatctl goes to MQTT over WebSocket on
// http_addr; with that off too, it names the settings and the flag to
// pass (exit 2). It used to fall back to mqtt://127.0.0.1:1883, where
// chatd was not listening or another broker was.
func TestWithMQTTAddrOffChatctlUsesTheWebSocketOrSaysWhatToPass(t *testing.T) {
	srv, env := startChatdEnv(t)
	env["CHAT_MQTT_ADDR"] = "off"
	env["CHAT_HTTP_ADDR"] = srv.HTTPAddr()
	mustOK(t, chatctl(t, env, "send", "--user", "1", "--peer", "2", "--body", "over ws"))

	env["CHAT_HTTP_ADDR"] = "off"
	wantFail(t, chatctl(t, env, "inbox", "--user", "1"), 2,
		"chatctl: inbox: chatd's mqtt_addr (from env CHAT_MQTT_ADDR) and http_addr (from env CHAT_HTTP_ADDR) are off", "--broker mqtt://HOST:PORT")

	// With a TLS listener, the flag it names is that listener's.
	env["CHAT_TLS_CERT"], env["CHAT_TLS_KEY"], env["CHAT_MQTTS_ADDR"] = "cert.pem", "key.pem", "0.0.0.0:8883"
	wantFail(t, chatctl(t, env, "inbox", "--user", "1"), 2, "pass --broker mqtts://HOST:8883, HOST a name chatd's certificate holds")
}
