// Package pgtest starts a throwaway PostgreSQL server for tests: Debian's packaged binaries
// (apt-get install postgresql; .ci/run installs them when missing), a fresh cluster in a
// temporary folder on a free port, fsync on, stopped when the test binary ends. It is test
// support: no product package imports it.
//
// Without PostgreSQL on the machine the tests that need it are skipped with a message,
// unless they run under CI ($CI set), where they fail. $QUOTASHARE_TEST_POSTGRES, a
// postgres:// URL, makes the tests use that server instead.
package pgtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running PostgreSQL server.
type Server struct {
	// URL reaches the server's maintenance database as its superuser.
	URL  string
	Host string
	Port int
	dir  string
	cmd  *exec.Cmd
	own  bool // started here, stopped by Stop
}

var (
	once    sync.Once
	shared  *Server
	sharedE error
)

// Start returns the test binary's PostgreSQL server, starting it at the first call.
// Call Stop from TestMain after m.Run.
func Start(t testing.TB) *Server {
	t.Helper()
	once.Do(func() { shared, sharedE = start() })
	if sharedE != nil {
		if errors.Is(sharedE, errMissing) && os.Getenv("CI") == "" {
			t.Skipf("%v: the PostgreSQL tests are skipped", sharedE)
		}
		t.Fatalf("PostgreSQL: %v", sharedE)
	}
	return shared
}

// Stop stops the server Start started, if any.
func Stop() {
	if shared != nil && shared.own {
		shared.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		done := make(chan struct{})
		go func() { shared.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			shared.cmd.Process.Kill()
		}
		os.RemoveAll(shared.dir)
	}
}

var errMissing = errors.New("no PostgreSQL on this machine (apt-get install postgresql)")

// binDir finds Debian's PostgreSQL binaries, the newest version first.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errMissing
}

func start() (*Server, error) {
	if u := os.Getenv("QUOTASHARE_TEST_POSTGRES"); u != "" {
		cfg, err := pgx.ParseConfig(u)
		if err != nil {
			return nil, fmt.Errorf("$QUOTASHARE_TEST_POSTGRES: %w", err)
		}
		return &Server{URL: u, Host: cfg.Host, Port: int(cfg.Port)}, nil
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "quotashare-pg-")
	if err != nil {
		return nil, err
	}
	// PostgreSQL refuses to run as root: as root, the cluster belongs to the postgres
	// user the Debian package made.
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, and no postgres user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Host: "127.0.0.1", Port: port, dir: dir, own: true,
		URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// The postmaster is told to die with this process (Pdeathsig is the starting
	// thread's, so that thread is kept for the process's life). Its log goes through a
	// pipe: the server is ready when it says so there.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+dir, "-c", "max_connections=200")
		s.cmd.Stdout, s.cmd.Stderr = pw, pw
		s.cmd.Dir = dir
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
		started <- s.cmd.Start()
		pw.Close()
		select {} // keep the thread
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		said := false
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if !said && strings.Contains(sc.Text(), "ready to accept connections") {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false // it exited without becoming ready
		}
	}()
	select {
	case ok := <-ready:
		if ok {
			return s, nil
		}
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
	}
	out, _ := os.ReadFile(filepath.Join(dir, "log"))
	return nil, fmt.Errorf("the server did not become ready:\n%s", out)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// NewDatabase makes an empty database for one test, dropped when the test ends, and
// returns its URL.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	cfg, _ := pgx.ParseConfig(s.URL)
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}
