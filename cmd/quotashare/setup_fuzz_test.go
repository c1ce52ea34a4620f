package main

import (
	"reflect"
	"testing"

	"github.com/quotashare/quotashare/examples"
)

// FuzzParseSetup: the setup file parser never panics; a file it takes renders (as export
// writes it) to a file it takes again, with the same content.
func FuzzParseSetup(f *testing.F) {
	f.Add(string(examples.ThreeProjects))
	f.Add("environment: {name: e, capacity: {ml.g5.xlarge: 2, ml.p5.48xlarge: 1}}\nqueue: {name: q, policy: p, priority: 7}\nshares:\n  - {name: a, limits: {ml.g5.xlarge: 1}, strategy: LEND_AND_BORROW, borrowLimit: -1, inSharePreemption: true, state: DISABLED}\n")
	f.Add("environment: {name: e, capacity: {t: 1}}\nqueue: {name: q, policy: p}\nshares:\n  - {name: a, limits: {t: 1}, strategy: LEND, borrowLimit: 5}\n")
	f.Add("shares: [")
	f.Add("")
	f.Fuzz(func(t *testing.T, data string) {
		s, err := parseSetup("f.yaml", []byte(data))
		if err != nil {
			return
		}
		again, err := parseSetup("rendered.yaml", []byte(s.render()))
		if err != nil {
			t.Fatalf("the rendered file is refused: %v\n%s", err, s.render())
		}
		if !reflect.DeepEqual(s, again) {
			t.Fatalf("the rendered file reads back differently:\n%+v\n%+v", s, again)
		}
	})
}
