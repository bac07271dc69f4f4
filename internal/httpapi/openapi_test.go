package httpapi_test

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/chatd/chatd/internal/httpapi"
)

// spec is the part of docs/openapi.yaml the tests read. Path items are kept
// as nodes because besides operations they may hold "parameters" and
// "summary", which do not decode as operations.
type spec struct {
	OpenAPI    string                          `yaml:"openapi"`
	Paths      map[string]map[string]yaml.Node `yaml:"paths"`
	Components struct {
		Parameters map[string]param `yaml:"parameters"`
	} `yaml:"components"`
}

type operation struct {
	OperationID string         `yaml:"operationId"`
	RPC         string         `yaml:"x-rpc-method"`
	Parameters  []param        `yaml:"parameters"`
	Responses   map[string]any `yaml:"responses"`
}

type param struct {
	Name string `yaml:"name"`
	In   string `yaml:"in"`
	Ref  string `yaml:"$ref"`
}

// ops returns the operations of the spec keyed by "METHOD /path", with
// path-level parameters merged in and $refs resolved.
func (s spec) ops(t *testing.T) map[string]operation {
	t.Helper()
	out := map[string]operation{}
	for path, item := range s.Paths {
		var shared []param
		if n, ok := item["parameters"]; ok {
			if err := n.Decode(&shared); err != nil {
				t.Fatalf("%s parameters: %v", path, err)
			}
		}
		for m, n := range item {
			if !httpMethods[m] {
				continue
			}
			var op operation
			if err := n.Decode(&op); err != nil {
				t.Fatalf("%s %s: %v", m, path, err)
			}
			op.Parameters = append(op.Parameters, shared...)
			for i, p := range op.Parameters {
				if p.Ref != "" {
					name := p.Ref[strings.LastIndex(p.Ref, "/")+1:]
					resolved, ok := s.Components.Parameters[name]
					if !ok {
						t.Fatalf("%s %s: unresolved parameter %s", m, path, p.Ref)
					}
					op.Parameters[i] = resolved
				}
			}
			out[strings.ToUpper(m)+" "+path] = op
		}
	}
	return out
}

func loadSpec(t *testing.T) spec {
	t.Helper()
	b, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatalf("read spec: %v", err)
	}
	var s spec
	if err := yaml.Unmarshal(b, &s); err != nil {
		t.Fatalf("parse spec: %v", err)
	}
	if !strings.HasPrefix(s.OpenAPI, "3.0") {
		t.Fatalf("openapi version %q, want 3.0.x", s.OpenAPI)
	}
	return s
}

var httpMethods = map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true, "trace": true}

// TestOpenAPIMatchesRoutes: the (method, path) pairs of docs/openapi.yaml are
// exactly the routes the API registers, each with the same RPC method, so
// spec and server cannot drift.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	ops := loadSpec(t).ops(t)
	var inSpec, served []string
	for key, op := range ops {
		inSpec = append(inSpec, key)
		if len(op.Responses) == 0 {
			t.Errorf("%s: no responses", key)
		}
		if op.OperationID == "" {
			t.Errorf("%s: no operationId", key)
		}
	}
	for _, r := range httpapi.Routes() {
		key := r.Method + " " + r.Path
		served = append(served, key)
		if op, ok := ops[key]; ok && op.RPC != r.RPC {
			t.Errorf("%s: x-rpc-method %q in the spec, %q served", key, op.RPC, r.RPC)
		}
	}
	sort.Strings(inSpec)
	sort.Strings(served)
	if strings.Join(inSpec, "\n") != strings.Join(served, "\n") {
		t.Errorf("spec and server differ\nspec:\n  %s\nserved:\n  %s",
			strings.Join(inSpec, "\n  "), strings.Join(served, "\n  "))
	}
}

// TestOpenAPIPathParameters: every {wildcard} of a path is declared as a path
// parameter of its operations, as OpenAPI requires, and nothing else is.
func TestOpenAPIPathParameters(t *testing.T) {
	wild := regexp.MustCompile(`\{([^}]+)\}`)
	for key, op := range loadSpec(t).ops(t) {
		declared := map[string]bool{}
		for _, p := range op.Parameters {
			if p.In == "path" {
				declared[p.Name] = true
			}
		}
		want := map[string]bool{}
		for _, w := range wild.FindAllStringSubmatch(key, -1) {
			want[w[1]] = true
		}
		if !reflect.DeepEqual(declared, want) {
			t.Errorf("%s: path parameters %v declared, %v in the path", key, declared, want)
		}
	}
}

// routesUnderV1 are the authenticated routes.
func routesUnderV1() []httpapi.Route {
	var out []httpapi.Route
	for _, r := range httpapi.Routes() {
		if strings.HasPrefix(r.Path, "/v1/") {
			out = append(out, r)
		}
	}
	return out
}
