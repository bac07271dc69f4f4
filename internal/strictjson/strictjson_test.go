package strictjson

import (
	"encoding/json"
	"reflect"
	"strings"
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

// TestALoneSurrogateRefusalNamesItsField: the refusal of a lone surrogate
// says which field holds it (a path through objects and arrays), as the
// refusal of an unknown or repeated field does: a client whose text came
// with half an emoji (a JavaScript string cut between the two halves of a
// pair) is told which of its fields to fix. It said only "a string".
func TestALoneSurrogateRefusalNamesItsField(t *testing.T) {
	type att struct {
		UploadID string `json:"uploadId"`
		Caption  string `json:"caption"`
	}
	type doc struct {
		Body string            `json:"body"`
		Atts []att             `json:"attachments"`
		M    map[string]string `json:"m"`
		R    json.RawMessage   `json:"r"`
	}
	for body, want := range map[string]string{
		`{"body":"a\ud800b"}`: `body holds \ud800`,
		`{"attachments":[{"uploadId":"x"},{"uploadId":"y","caption":"\udc00"}]}`: `attachments[1].caption holds \udc00`,
		`{"m":{"k":"\ud83d"}}`: `m.k holds \ud83d`,
		`{"r":["\ud800"]}`:     `r[0] holds \ud800`,
		`"\ud800"`:             `a string holds \ud800`,
	} {
		err := ExactKeys([]byte(body), reflect.TypeOf(&doc{}))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", body, err, want)
		}
	}
}
