package strictjson

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestExactKeysRefusesALoneSurrogateEscape: a string escaping half a
// surrogate pair is refused wherever it is (a field, an array, a map, a
// field of a type that decodes itself); a whole pair, an escaped
// backslash before "u" and other escapes are not escapes of a surrogate.
func TestExactKeysRefusesALoneSurrogateEscape(t *testing.T) {
	type inner struct {
		S string `json:"s"`
	}
	type doc struct {
		S  string            `json:"s"`
		L  []string          `json:"l"`
		M  map[string]string `json:"m"`
		In *inner            `json:"in"`
		R  json.RawMessage   `json:"r"`
	}
	for body, refuse := range map[string]bool{
		`{"s":"\ud800"}`:               true,
		`{"s":"a\udfffb"}`:             true,
		`{"s":"\ud83d\ud83d"}`:         true,
		`{"s":"\ud83dx\udc4d"}`:        true,
		`{"s":"\uDBFF\u0041"}`:         true,
		`{"s":"x\ud83d"}`:              true,
		`{"l":["ok","\ud800"]}`:        true,
		`{"m":{"k":"\udc00"}}`:         true,
		`{"in":{"s":"\ud800"}}`:        true,
		`{"r":"\ud800"}`:               true,
		`{"s":"\ud83d\udc4d"}`:         false,
		`{"s":"\uD83D\uDC4D\u00e9"}`:   false,
		`{"s":"\\ud800"}`:              false,
		`{"s":"\\\ud83d\udc4d\n\"\/"}`: false,
		`{"s":"\ud7ff\ue000"}`:         false,
		`{"s":"plain"}`:                false,
	} {
		var v doc
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		err := ExactKeys([]byte(body), reflect.TypeOf(&v))
		if (err != nil) != refuse {
			t.Errorf("%s: %v, want refused %v", body, err, refuse)
		}
	}
}
