package batchapi

// Authorization: who may do what, once a request's signature names its access key. The
// credentials file is either the two-column file (every key is an admin) or a policy file
// in YAML that gives each principal its keys, its role and, for a team, its shares.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// Role is what a principal may do.
type Role string

const (
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
	// RoleTeam may read everything, and submit, update and terminate jobs in its shares.
	RoleTeam Role = "team"
	// RoleReadOnly may describe, list and read logs and metrics.
	RoleReadOnly Role = "read-only"
)

// Principal is who a key belongs to.
type Principal struct {
	Name string
	Role Role
	// Shares are a team's shares, by queue name.
	Shares map[string][]string
}

// policyFile is the YAML form of the credentials file.
type policyFile struct {
	Principals []struct {
		Name string `yaml:"name"`
		Keys []struct {
			ID     string `yaml:"id"`
			Secret string `yaml:"secret"`
		} `yaml:"keys"`
		Role   Role                `yaml:"role"`
		Shares map[string][]string `yaml:"shares"`
	} `yaml:"principals"`
}

// parsePolicy reads a policy file's principals into the verifier.
func (v *Verifier) parsePolicy(path string, data []byte) error {
	var p policyFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("%s: not a credentials file (ACCESS_KEY_ID SECRET lines) nor a policy file: %v", path, err)
	}
	for i, pr := range p.Principals {
		field := fmt.Sprintf("%s: principals[%d]", path, i)
		switch {
		case pr.Name == "":
			return fmt.Errorf("%s.name: is required", field)
		case pr.Role != RoleAdmin && pr.Role != RoleTeam && pr.Role != RoleReadOnly:
			return fmt.Errorf("%s.role: %q must be admin, team or read-only", field, pr.Role)
		case pr.Role == RoleTeam && len(pr.Shares) == 0:
			return fmt.Errorf("%s.shares: a team needs its shares, by queue: {queue: [share, ...]}", field)
		case pr.Role != RoleTeam && len(pr.Shares) > 0:
			return fmt.Errorf("%s.shares: only a team has shares; %s may %s", field, pr.Role, map[Role]string{RoleAdmin: "use every share", RoleReadOnly: "use none"}[pr.Role])
		case len(pr.Keys) == 0:
			return fmt.Errorf("%s.keys: give at least one {id, secret}", field)
		}
		who := &Principal{Name: pr.Name, Role: pr.Role, Shares: pr.Shares}
		for j, k := range pr.Keys {
			if k.ID == "" || k.Secret == "" {
				return fmt.Errorf("%s.keys[%d]: needs id and secret", field, j)
			}
			if _, dup := v.secrets[k.ID]; dup {
				return fmt.Errorf("%s.keys[%d].id: %s is given twice", field, j, k.ID)
			}
			v.secrets[k.ID], v.principals[k.ID] = k.Secret, who
		}
	}
	return nil
}

type principalKey struct{}

// principalOf is the principal of a verified request (nil: the server checks no
// signatures).
func principalOf(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// Authorize wraps the API: a request of a principal that may not do it is refused with
// AccessDeniedException, naming the principal and what it lacks. Reads of logs and
// metrics need only a known principal (Require checks that). References are read as the
// handler reads them (arns).
func Authorize(e control.Viewer, arns ARNs, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r.Context())
		if p == nil || p.Role == RoleAdmin {
			h.ServeHTTP(w, r)
			return
		}
		op := strings.TrimPrefix(r.URL.Path, "/v1/")
		if strings.HasPrefix(op, "tags/") {
			op = TagsOperation
			if r.Method == http.MethodGet {
				h.ServeHTTP(w, r) // ListTagsForResource
				return
			}
		}
		a, known := access[op]
		switch {
		case known && a == AccessRead:
			h.ServeHTTP(w, r)
			return
		case !known || a != AccessJob || p.Role != RoleTeam:
			deny(w, fmt.Sprintf("principal %s (%s) may not call %s", p.Name, p.Role, op))
			return
		}
		r, data, err := body(w, r)
		if err != nil {
			writeError(w, err)
			return
		}
		var in struct {
			JobQueue       string `json:"jobQueue"`
			QuotaShareName string `json:"quotaShareName"`
			JobID          string `json:"jobId"`
		}
		json.Unmarshal(data, &in)           // a malformed body is the operation's to refuse
		queue, _ := arns.queue(in.JobQueue) // a bad reference is the operation's to refuse
		share := in.QuotaShareName
		if op != "submitservicejob" {
			j, err := control.Get(e, func(st *control.State) (quotashare.Job, error) { return st.Job(jobID(in.JobID)) })
			if err != nil {
				h.ServeHTTP(w, r) // the operation says it does not exist
				return
			}
			queue, share = j.Queue, j.Share
		}
		if !slices.Contains(p.Shares[queue], share) {
			deny(w, fmt.Sprintf("principal %s (team) may not %s in share %q of job queue %s: its shares are %s", p.Name, op, share, queue, sharesText(p.Shares)))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func sharesText(m map[string][]string) string {
	var parts []string
	for _, q := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, q+"/{"+strings.Join(m[q], ",")+"}")
	}
	return strings.Join(parts, " ")
}

func deny(w http.ResponseWriter, msg string) {
	w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException")
	writeJSON(w, http.StatusForbidden, map[string]string{"__type": "AccessDeniedException", "message": msg})
}
