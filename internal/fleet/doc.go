// Package fleet is the fault tests' crowd of phones: many persistent MQTT
// sessions run by one process built WITHOUT the race detector (the command
// test/faults/fleet), so that a storm test measures chatd and not a
// race-instrumented load generator. Under -race the test process spent
// more CPU per connection than chatd: beside the web tests' browsers,
// 2,000 reconnects that took a plain build 3.6-3.9 s took the race-built
// crowd 8-14 s.
//
// Run serves one test over its input and output, one JSON object per
// line. The first line is a Setup; then each command line gets one reply
// line:
//
//	{"op":"connect","deadline":UNIX_MS}
//	    every phone (none is connected: at first or after drop) connects
//	    and subscribes to its events topic, all at once, retrying a refused
//	    or failed attempt after a jittered 200-600 ms (as a phone's MQTT
//	    library backs off) until the deadline. Reply: Connected.
//	{"op":"drop"}
//	    every connection is closed without DISCONNECT (a lost network) and
//	    its publishes handled. Reply: {}.
//	{"op":"missing","seq":S}
//	    Reply: {"missing":N}, the phones whose conversation is not at seq S
//	    yet.
//	{"op":"violations"}
//	    Reply: {"violations":[...]}, the gaps phones saw.
//
// Every phone reads from its CONNACK on (a resumed session is delivered to
// at once), acknowledges each QoS 1 publish and keeps the highest
// message.new seq of its conversation, noting a gap. End of input drops
// everyone. Run is one goroutine's; each phone has its own reader.
package fleet
