package quotashare

import "testing"

// TestParseAttemptID: it reads back what AttemptID makes, and refuses what it does not.
func TestParseAttemptID(t *testing.T) {
	id := "8d738108-05b0-4772-adcf-ade75845e6ef"
	if job, n, ok := ParseAttemptID(AttemptID(id, 12)); !ok || job != id || n != 12 {
		t.Errorf("ParseAttemptID(AttemptID(%s, 12)) = %q %d %v", id, job, n, ok)
	}
	for _, bad := range []string{"", "-1", "job-", "job-x1", "not-an-attempt", "nodash"} {
		if _, _, ok := ParseAttemptID(bad); ok {
			t.Errorf("ParseAttemptID(%q) took it", bad)
		}
	}
}
