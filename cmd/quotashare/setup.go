package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/sched"
)

// setup is what a setup file declares: one environment, one queue on it with its
// scheduling policy, and the queue's quota shares.
type setup struct {
	Environment struct {
		Name     string         `json:"name"`
		Capacity map[string]int `json:"capacity"`
	} `json:"environment"`
	Queue struct {
		Name     string `json:"name"`
		Priority int    `json:"priority"`
		Policy   string `json:"policy"`
	} `json:"queue"`
	Shares []shareSpec `json:"shares"`
}

type shareSpec struct {
	Name              string         `json:"name"`
	Limits            map[string]int `json:"limits"`
	Strategy          string         `json:"strategy"`
	BorrowLimit       *int           `json:"borrowLimit,omitempty"`
	InSharePreemption bool           `json:"inSharePreemption"`
	// MinRunTime is quotashare's minimum run time before preemption, in whole seconds
	// (minRunTime: 90s in the file); MinRunTimeAgainstReclaim extends it to reclaim.
	MinRunTime               int  `json:"minRunTimeSeconds,omitempty"`
	MinRunTimeAgainstReclaim bool `json:"minRunTimeAgainstReclaim,omitempty"`
	// Disabled is state: DISABLED (a share takes no new jobs); ENABLED when left out.
	Disabled bool `json:"disabled,omitempty"`
}

// minRunTimeMember is the share's quotashareMinRunTime member for Create/UpdateQuotaShare.
func (sh shareSpec) minRunTimeMember() map[string]any {
	return map[string]any{"quotashareMinRunTime": map[string]any{"seconds": sh.MinRunTime, "againstReclaim": sh.MinRunTimeAgainstReclaim}}
}

// minRunTimeText says a minimum run time as the setup file writes it.
func minRunTimeText(seconds int, againstReclaim bool) string {
	if seconds == 0 {
		return "none"
	}
	text := (time.Duration(seconds) * time.Second).String()
	if againstReclaim {
		text += " (against reclaim too)"
	}
	return text
}

// stateOf is a share's state on the wire.
func (sh shareSpec) stateOf() types.QuotaShareState {
	if sh.Disabled {
		return types.QuotaShareStateDisabled
	}
	return types.QuotaShareStateEnabled
}

// setupError is a bad setup file: the line and the rule.
type setupError struct {
	file string
	line int
	msg  string
}

func (e *setupError) Error() string { return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg) }

// parseSetup reads a setup file, checking every rule before anything is applied.
func parseSetup(file string, data []byte) (*setup, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: not valid YAML: %v", file, err)
	}
	bad := func(n *yaml.Node, format string, args ...any) error {
		return &setupError{file, n.Line, fmt.Sprintf(format, args...)}
	}
	if len(doc.Content) == 0 {
		return nil, &setupError{file, 1, "the file is empty; it needs environment, queue and shares"}
	}
	root := doc.Content[0]
	var s setup
	seen, err := fields(root, bad, "", map[string]func(*yaml.Node) error{
		"environment": func(n *yaml.Node) error {
			_, err := fields(n, bad, "environment.", map[string]func(*yaml.Node) error{
				"name":     func(v *yaml.Node) error { return name(v, bad, "environment.name", &s.Environment.Name) },
				"capacity": func(v *yaml.Node) error { return counts(v, bad, "environment.capacity", &s.Environment.Capacity) },
			}, "name", "capacity")
			return err
		},
		"queue": func(n *yaml.Node) error {
			_, err := fields(n, bad, "queue.", map[string]func(*yaml.Node) error{
				"name":   func(v *yaml.Node) error { return name(v, bad, "queue.name", &s.Queue.Name) },
				"policy": func(v *yaml.Node) error { return name(v, bad, "queue.policy", &s.Queue.Policy) },
				"priority": func(v *yaml.Node) error {
					return integer(v, bad, "queue.priority", 0, 1000, &s.Queue.Priority)
				},
			}, "name", "policy")
			return err
		},
		"shares": func(n *yaml.Node) error {
			if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
				return bad(n, "shares: must be a list of 1 to 20 quota shares")
			}
			if len(n.Content) > 20 {
				return bad(n, "shares: %d quota shares is more than the 20 a queue may have", len(n.Content))
			}
			names := map[string]bool{}
			for i, sn := range n.Content {
				var sh shareSpec
				p := fmt.Sprintf("shares[%d].", i)
				var borrow int
				seen, err := fields(sn, bad, p, map[string]func(*yaml.Node) error{
					"name":   func(v *yaml.Node) error { return name(v, bad, p+"name", &sh.Name) },
					"limits": func(v *yaml.Node) error { return counts(v, bad, p+"limits", &sh.Limits) },
					"strategy": func(v *yaml.Node) error {
						sh.Strategy = v.Value
						if !quotashare.Strategy(v.Value).Valid() {
							return bad(v, "%sstrategy: %q must be RESERVE, LEND or LEND_AND_BORROW", p, v.Value)
						}
						return nil
					},
					"borrowLimit": func(v *yaml.Node) error {
						return integer(v, bad, p+"borrowLimit", -1, 1_000_000, &borrow)
					},
					"inSharePreemption": func(v *yaml.Node) error {
						b, err := strconv.ParseBool(v.Value)
						if err != nil || v.Kind != yaml.ScalarNode {
							return bad(v, "%sinSharePreemption: %q must be true or false", p, v.Value)
						}
						sh.InSharePreemption = b
						return nil
					},
					"minRunTime": func(v *yaml.Node) error {
						d, err := time.ParseDuration(v.Value)
						if v.Value == "0" {
							d, err = 0, nil
						}
						if err != nil || v.Kind != yaml.ScalarNode || d < 0 || d > sched.MaxMinRunTime || d%time.Second != 0 {
							return bad(v, "%sminRunTime: %q must be whole seconds from 0s to %v, such as 90s or 10m", p, v.Value, sched.MaxMinRunTime)
						}
						sh.MinRunTime = int(d / time.Second)
						return nil
					},
					"minRunTimeAgainstReclaim": func(v *yaml.Node) error {
						b, err := strconv.ParseBool(v.Value)
						if err != nil || v.Kind != yaml.ScalarNode {
							return bad(v, "%sminRunTimeAgainstReclaim: %q must be true or false", p, v.Value)
						}
						sh.MinRunTimeAgainstReclaim = b
						return nil
					},
					"state": func(v *yaml.Node) error {
						switch {
						case v.Kind == yaml.ScalarNode && v.Value == "ENABLED":
						case v.Kind == yaml.ScalarNode && v.Value == "DISABLED":
							sh.Disabled = true
						default:
							return bad(v, "%sstate: %q must be ENABLED or DISABLED", p, v.Value)
						}
						return nil
					},
				}, "name", "limits", "strategy")
				if err != nil {
					return err
				}
				if seen["borrowLimit"] != nil {
					if sh.Strategy != string(quotashare.LendAndBorrow) {
						return bad(seen["borrowLimit"], "%sborrowLimit: applies only to strategy LEND_AND_BORROW, not %s", p, sh.Strategy)
					}
					sh.BorrowLimit = &borrow
				}
				if sh.MinRunTimeAgainstReclaim && sh.MinRunTime == 0 {
					return bad(seen["minRunTimeAgainstReclaim"], "%sminRunTimeAgainstReclaim: applies only with a minRunTime above 0s", p)
				}
				if len(sh.Limits) > 5 {
					return bad(seen["limits"], "%slimits: a quota share has 1 to 5 limits; got %d", p, len(sh.Limits))
				}
				if names[sh.Name] {
					return bad(seen["name"], "%sname: quota share %s is declared twice", p, sh.Name)
				}
				names[sh.Name] = true
				s.Shares = append(s.Shares, sh)
			}
			return nil
		},
	}, "environment", "queue", "shares")
	if err != nil {
		return nil, err
	}
	if len(s.Environment.Capacity) > 5 {
		return nil, bad(seen["environment"], "environment.capacity: 1 to 5 instance types; got %d", len(s.Environment.Capacity))
	}
	return &s, nil
}

// fields walks a mapping: each key must be one of handlers' (else an error naming the
// known ones), and each required key must be there. It returns the value nodes by key.
func fields(n *yaml.Node, bad func(*yaml.Node, string, ...any) error, prefix string, handlers map[string]func(*yaml.Node) error, required ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, bad(n, "%s: must be a mapping of %s", strings.TrimSuffix(prefix, "."), strings.Join(slices.Sorted(maps.Keys(handlers)), ", "))
	}
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		h, ok := handlers[k.Value]
		if !ok {
			return nil, bad(k, "%s%s: unknown field; the fields here are %s", prefix, k.Value, strings.Join(slices.Sorted(maps.Keys(handlers)), ", "))
		}
		if seen[k.Value] != nil {
			return nil, bad(k, "%s%s: given twice", prefix, k.Value)
		}
		seen[k.Value] = v
		if err := h(v); err != nil {
			return nil, err
		}
	}
	for _, r := range required {
		if seen[r] == nil {
			return nil, bad(n, "%s%s: is required", prefix, r)
		}
	}
	return seen, nil
}

func name(v *yaml.Node, bad func(*yaml.Node, string, ...any) error, field string, out *string) error {
	if v.Kind != yaml.ScalarNode || !quotashare.ValidName(v.Value) {
		return bad(v, "%s: %q must be 1-128 letters, digits, '-' or '_'", field, v.Value)
	}
	*out = v.Value
	return nil
}

func integer(v *yaml.Node, bad func(*yaml.Node, string, ...any) error, field string, lo, hi int, out *int) error {
	n, err := strconv.Atoi(v.Value)
	if v.Kind != yaml.ScalarNode || err != nil || n < lo || n > hi {
		return bad(v, "%s: %q must be a whole number from %d to %d", field, v.Value, lo, hi)
	}
	*out = n
	return nil
}

// counts reads a mapping of instance type to a count of at least 1.
func counts(v *yaml.Node, bad func(*yaml.Node, string, ...any) error, field string, out *map[string]int) error {
	if v.Kind != yaml.MappingNode || len(v.Content) == 0 {
		return bad(v, "%s: must map instance types to counts, e.g. {ml.g5.xlarge: 2}", field)
	}
	m := map[string]int{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, c := v.Content[i], v.Content[i+1]
		if k.Value == "" || k.Value == "NUM_INSTANCES" {
			return bad(k, "%s: %q is not an instance type", field, k.Value)
		}
		if _, dup := m[k.Value]; dup {
			return bad(k, "%s.%s: given twice", field, k.Value)
		}
		var n int
		if err := integer(c, bad, field+"."+k.Value, 1, 1_000_000, &n); err != nil {
			return err
		}
		m[k.Value] = n
	}
	*out = m
	return nil
}

// render writes a setup back as a file apply reads.
func (s *setup) render() string {
	var b strings.Builder
	countsOf := func(m map[string]int) string {
		var parts []string
		for _, t := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s: %d", t, m[t]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	fmt.Fprintf(&b, "environment:\n  name: %s\n  capacity: %s\n", s.Environment.Name, countsOf(s.Environment.Capacity))
	fmt.Fprintf(&b, "queue:\n  name: %s\n  priority: %d\n  policy: %s\n", s.Queue.Name, s.Queue.Priority, s.Queue.Policy)
	b.WriteString("shares:\n")
	for _, sh := range s.Shares {
		fmt.Fprintf(&b, "  - name: %s\n    limits: %s\n    strategy: %s\n", sh.Name, countsOf(sh.Limits), sh.Strategy)
		if sh.BorrowLimit != nil {
			fmt.Fprintf(&b, "    borrowLimit: %d\n", *sh.BorrowLimit)
		}
		fmt.Fprintf(&b, "    inSharePreemption: %t\n", sh.InSharePreemption)
		if sh.MinRunTime > 0 {
			fmt.Fprintf(&b, "    minRunTime: %v\n", time.Duration(sh.MinRunTime)*time.Second)
			if sh.MinRunTimeAgainstReclaim {
				b.WriteString("    minRunTimeAgainstReclaim: true\n")
			}
		}
		if sh.Disabled {
			b.WriteString("    state: DISABLED\n")
		}
	}
	return b.String()
}
