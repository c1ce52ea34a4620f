package batchapi

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoadCredentials: a credentials or policy file never panics the loader, and every
// key it takes has a principal with a known role (a team with shares).
func FuzzLoadCredentials(f *testing.F) {
	f.Add("AKID secret\n# comment\nAKID2 s2\n")
	f.Add("principals:\n  - name: vision\n    role: team\n    shares: {q: [a, b]}\n    keys: [{id: A, secret: B}]\n")
	f.Add("principals:\n  - name: x\n    role: admin\n    keys: [{id: A, secret: B}]\n  - name: r\n    role: read-only\n    keys: [{id: C, secret: D}]\n")
	f.Add("principals: [")
	f.Add(":")
	f.Fuzz(func(t *testing.T, data string) {
		path := filepath.Join(t.TempDir(), "creds")
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		v, err := LoadCredentials(path)
		if err != nil {
			return
		}
		for id := range v.secrets {
			p := v.principals[id]
			switch {
			case p == nil:
				t.Fatalf("key %s has no principal", id)
			case p.Role != RoleAdmin && p.Role != RoleTeam && p.Role != RoleReadOnly:
				t.Fatalf("key %s: role %q", id, p.Role)
			case p.Role == RoleTeam && len(p.Shares) == 0:
				t.Fatalf("key %s: a team without shares", id)
			}
		}
	})
}
