package procexec

import (
	"os"
	"testing"

	"github.com/quotashare/quotashare/internal/supervisor"
)

func TestMain(m *testing.M) {
	supervisor.Intercept() // the test binary is the jobs' supervisor
	os.Exit(m.Run())
}
