// Package sqlite is the embedded default Store: one SQLite file (modernc.org/sqlite, pure
// Go) in the server's data folder, in WAL mode with synchronous=FULL, so that a committed
// batch survives a crash of the process and of the machine. It knows nothing of what the
// objects mean.
//
// The writer lease is an exclusive lock (flock) on the file quotashare.lock in the data
// folder, held for as long as the server holds the lease, and a term in the database that
// every acquisition raises and every commit checks inside its transaction.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/quotashare/quotashare"
)

// FileName is the database's name inside the data folder.
const FileName = "quotashare.db"

// LockName is the lock file's name inside the data folder.
const LockName = "quotashare.lock"

// migrations bring the schema from version i to i+1; their order never changes.
var migrations = []string{
	`CREATE TABLE objects (
		kind TEXT NOT NULL,
		key  TEXT NOT NULL,
		body BLOB NOT NULL,
		PRIMARY KEY (kind, key)
	) WITHOUT ROWID`,
	`CREATE TABLE lease (
		id     INTEGER PRIMARY KEY CHECK (id = 1),
		term   INTEGER NOT NULL,
		holder TEXT NOT NULL
	);
	INSERT INTO lease (id, term, holder) VALUES (1, 0, '')`,
}

// DB is a Store in one SQLite file.
type DB struct {
	db   *sql.DB
	dir  string
	path string

	mu   sync.Mutex
	lock *os.File // the flock'd lock file while the lease is held

	// The WAL is copied into the database by a connection of its own, in the
	// background, instead of inside a commit every thousand pages (SQLite's automatic
	// checkpoint, turned off): a commit then waits for its own fsync only.
	ckpt      *sql.DB
	commits   int           // since the last kick
	kick      chan struct{} // asks for a checkpoint
	stop      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
	// checkpointed, if set (tests), hears the result of each checkpoint.
	checkpointed func(error)
}

// checkpointEvery is how many commits go by between checkpoints (besides one a second).
const checkpointEvery = 256

var _ quotashare.Store = (*DB)(nil)

// Open opens (creating if needed) the database in the data folder dir and brings its
// schema up to date. It takes no lease: call Acquire before writing.
func Open(dir string) (*DB, error) {
	// The folder and the database are the server's alone: they hold every job's payload.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data folder: %w", err)
	}
	path := filepath.Join(dir, FileName)
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(5000)", "foreign_keys(1)", "wal_autocheckpoint(0)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one writer; reads come from the server's memory
	d := &DB{db: db, dir: dir, path: path}
	if err := d.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(f, 0o600); err != nil && !os.IsNotExist(err) {
			db.Close()
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	ckpt, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	ckpt.SetMaxOpenConns(1)
	d.ckpt, d.kick, d.stop, d.stopped = ckpt, make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go d.checkpoints()
	return d, nil
}

// checkpoints copies the WAL into the database (PASSIVE: it never blocks a commit)
// after every checkpointEvery commits and once a second, until Close.
func (d *DB) checkpoints() {
	defer close(d.stopped)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-d.kick:
		case <-t.C:
		}
		_, err := d.ckpt.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
		d.mu.Lock()
		hook := d.checkpointed
		d.mu.Unlock()
		if hook != nil {
			hook(err)
		}
	}
}

func (d *DB) migrate() error {
	var v int
	if err := d.db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this quotashare knows (%d): upgrade quotashare", v, len(migrations))
	}
	for ; v < len(migrations); v++ {
		tx, err := d.db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(migrations[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Acquire locks the data folder for holder and raises the lease's term. A folder locked
// by another server (in this process or another) is refused at once, naming it.
func (d *DB) Acquire(ctx context.Context, holder quotashare.LeaseHolder) (quotashare.Lease, error) {
	if err := ctx.Err(); err != nil {
		return quotashare.Lease{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lock != nil {
		return quotashare.Lease{}, fmt.Errorf("data folder %s: this store already holds its lease: %w", d.dir, quotashare.ErrLeaseHeld)
	}
	f, err := os.OpenFile(filepath.Join(d.dir, LockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return quotashare.Lease{}, fmt.Errorf("data folder %s: lock file: %w", d.dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			var other quotashare.LeaseHolder
			b, _ := os.ReadFile(f.Name())
			json.Unmarshal(b, &other)
			return quotashare.Lease{}, fmt.Errorf("data folder %s is in use by quotashare pid %d serving %s; stop that server or choose another --data: %w",
				d.dir, other.PID, other.Addr, quotashare.ErrLeaseHeld)
		}
		return quotashare.Lease{}, fmt.Errorf("data folder %s: locking %s: %w", d.dir, LockName, err)
	}
	b, _ := json.Marshal(holder)
	// Who holds the lock, for the refusal a second server gets. Best effort: the lock
	// holds without it (the refusal then names no pid).
	if f.Truncate(0) == nil {
		f.WriteAt(append(b, '\n'), 0)
	}
	var term int64
	tx, err := d.db.BeginTx(ctx, nil)
	if err == nil {
		err = tx.QueryRowContext(ctx, `UPDATE lease SET term = term + 1, holder = ? WHERE id = 1 RETURNING term`, string(b)).Scan(&term)
		if err == nil {
			err = tx.Commit()
		} else {
			tx.Rollback()
		}
	}
	if err != nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		return quotashare.Lease{}, fmt.Errorf("data folder %s: raising the lease term: %w", d.dir, err)
	}
	d.lock = f
	return quotashare.Lease{Term: term, Holder: holder}, nil
}

// Release unlocks the data folder. The term stays as it is: the next Acquire raises it,
// so commits under this lease fail from then on.
func (d *DB) Release(ctx context.Context, lease quotashare.Lease) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.unlock()
}

func (d *DB) unlock() error {
	if d.lock == nil {
		return nil
	}
	f := d.lock
	d.lock = nil
	f.Truncate(0)
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return f.Close()
}

// Load calls fn for every object, ordered by kind and key.
func (d *DB) Load(ctx context.Context, fn func(quotashare.Record) error) error {
	rows, err := d.db.QueryContext(ctx, `SELECT kind, key, body FROM objects ORDER BY kind, key`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r quotashare.Record
		if err := rows.Scan(&r.Kind, &r.Key, &r.Body); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Commit writes the batch in one transaction: an upsert per record, or a delete where
// the body is nil. It checks the lease's term inside the transaction, and returns once
// the transaction is durable.
func (d *DB) Commit(ctx context.Context, lease quotashare.Lease, batch []quotashare.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	held := d.lock != nil
	d.mu.Unlock()
	if !held {
		return fmt.Errorf("committing under term %d after the lease was released: %w", lease.Term, quotashare.ErrLeaseLost)
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	var term int64
	if err := tx.QueryRowContext(ctx, `SELECT term FROM lease WHERE id = 1`).Scan(&term); err != nil {
		return fmt.Errorf("reading the lease term: %w", err)
	}
	if term != lease.Term {
		return fmt.Errorf("committing under term %d, but the store is at term %d: %w", lease.Term, term, quotashare.ErrLeaseLost)
	}
	if len(batch) == 0 {
		return nil
	}
	put, err := tx.PrepareContext(ctx, `INSERT INTO objects (kind, key, body) VALUES (?, ?, ?)
		ON CONFLICT (kind, key) DO UPDATE SET body = excluded.body`)
	if err != nil {
		return err
	}
	defer put.Close()
	del, err := tx.PrepareContext(ctx, `DELETE FROM objects WHERE kind = ? AND key = ?`)
	if err != nil {
		return err
	}
	defer del.Close()
	for _, r := range batch {
		switch {
		case r.Kind == "" || r.Key == "":
			err = fmt.Errorf("a record needs a kind and a key (got kind %q, key %q)", r.Kind, r.Key)
		case r.Body == nil:
			_, err = del.ExecContext(ctx, r.Kind, r.Key)
		default:
			_, err = put.ExecContext(ctx, r.Kind, r.Key, r.Body)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", r.Kind, r.Key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	d.mu.Lock()
	d.commits++
	due := d.commits >= checkpointEvery
	if due {
		d.commits = 0
	}
	d.mu.Unlock()
	if due {
		select {
		case d.kick <- struct{}{}:
		default: // one is asked for already
		}
	}
	return nil
}

// Close releases the lease, if held, and closes the database.
func (d *DB) Close() error {
	d.mu.Lock()
	err := d.unlock()
	d.mu.Unlock()
	var cerr error
	d.closeOnce.Do(func() {
		close(d.stop)
		<-d.stopped
		cerr = d.ckpt.Close()
	})
	return errors.Join(err, cerr, d.db.Close())
}

// Backup writes a consistent copy of the data folder's database to out (a new file),
// while a server may be using it: SQLite's VACUUM INTO reads one snapshot of the database
// and its WAL. The copy is a complete database: put it as quotashare.db in an empty data
// folder to start a server on it.
func Backup(dir, out string) error {
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("data folder %s: %w", dir, err)
	}
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s exists: a backup goes to a new file", out)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec("VACUUM INTO ?", out); err != nil {
		return fmt.Errorf("backing up %s: %w", path, err)
	}
	return os.Chmod(out, 0o600)
}
