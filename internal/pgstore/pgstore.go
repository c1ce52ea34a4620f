// Package pgstore is the Store for several replicas: a PostgreSQL database (pgx v5) that
// the replicas share. Like the SQLite store it knows nothing of what the objects mean.
//
// The writer lease is one row (table lease): its holder, a term that every acquisition
// raises, and an expiry in the database's own clock. The holder renews it in the
// background, well within its time to live; another replica may take it once it has
// expired. Every commit checks the term and the expiry inside its own transaction, and
// holds the lease row until it ends, so a deposed leader's late write fails and can never
// land after its successor's first.
package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quotashare/quotashare"
)

// migrations bring the schema from version i to i+1; their order never changes.
var migrations = []string{
	`CREATE TABLE quotashare_objects (
		kind TEXT COLLATE "C" NOT NULL,
		key  TEXT COLLATE "C" NOT NULL,
		body BYTEA NOT NULL,
		PRIMARY KEY (kind, key)
	);
	CREATE TABLE quotashare_lease (
		id      INTEGER PRIMARY KEY CHECK (id = 1),
		term    BIGINT NOT NULL,
		holder  JSONB,
		expires TIMESTAMPTZ NOT NULL
	);
	INSERT INTO quotashare_lease (id, term, holder, expires) VALUES (1, 0, NULL, 'epoch')`,
}

// DefaultTTL is how long a lease lasts without renewal.
const DefaultTTL = 10 * time.Second

// migrationLock is the advisory lock replicas starting together take to migrate one at
// a time.
const migrationLock = 7_131_707

// DB is a Store in a PostgreSQL database.
type DB struct {
	pool *pgxpool.Pool
	ttl  time.Duration

	mu   sync.Mutex
	held *quotashare.Lease // the lease this handle holds, if any
	// deadline is when this handle stops trusting its lease unless a renewal gets
	// through first: a quarter of the TTL before the database's expiry can be at the
	// earliest (the TTL from when the last successful renewal was sent).
	deadline time.Time
	stop     chan struct{} // ends the renewal
	done     chan struct{} // closed when the renewal has ended
	lost     chan struct{} // closed when a held lease is found lost
	lostWhy  error         // why lost was closed
	close    sync.Once
	// renewed, if set (tests), hears of each successful renewal; extended, of each
	// renewal the database took, before the handle records it.
	renewed, extended func()
}

var _ quotashare.Store = (*DB)(nil)

// Options tune a DB.
type Options struct {
	// TTL is the lease's time to live (DefaultTTL if 0); it is renewed every third of it.
	TTL time.Duration
}

// Open connects to the database at url (postgres://...) and brings its schema up to
// date. It takes no lease: call Acquire before writing.
func Open(ctx context.Context, url string, opt Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("--store %s: %w", redact(url), err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL at %s: %w", redact(url), err)
	}
	d := &DB{pool: pool, ttl: opt.TTL}
	if d.ttl <= 0 {
		d.ttl = DefaultTTL
	}
	if err := d.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL at %s: %w", redact(url), err)
	}
	return d, nil
}

// redact drops a password from a URL for messages.
func redact(url string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "(an unreadable URL)"
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

func (d *DB) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS quotashare_schema (version INTEGER NOT NULL)`); err != nil {
			return err
		}
		var v int
		err := tx.QueryRow(ctx, `SELECT version FROM quotashare_schema`).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := tx.Exec(ctx, `INSERT INTO quotashare_schema VALUES (0)`); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		if v > len(migrations) {
			return fmt.Errorf("the database's schema is version %d, newer than this quotashare's %d: run the newer release", v, len(migrations))
		}
		for ; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("schema migration %d: %w", v+1, err)
			}
		}
		_, err = tx.Exec(ctx, `UPDATE quotashare_schema SET version = $1`, v)
		return err
	})
}

// Acquire takes the lease for holder if nobody holds it or its holder let it expire.
func (d *DB) Acquire(ctx context.Context, holder quotashare.LeaseHolder) (quotashare.Lease, error) {
	who, err := json.Marshal(holder)
	if err != nil {
		return quotashare.Lease{}, err
	}
	var l quotashare.Lease
	sent := time.Now()
	// A try that takes longer than the lease lives is no use (and the database may be
	// out of reach, with no answer ever coming): give up and let the caller try again.
	ctx, cancel := context.WithTimeout(ctx, d.ttl)
	defer cancel()
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		var term int64
		var cur []byte
		var live bool
		err := tx.QueryRow(ctx, `SELECT term, holder, holder IS NOT NULL AND expires > clock_timestamp()
			FROM quotashare_lease WHERE id = 1 FOR UPDATE`).Scan(&term, &cur, &live)
		if err != nil {
			return err
		}
		if live {
			held := &quotashare.LeaseHeldError{Store: "PostgreSQL store"}
			json.Unmarshal(cur, &held.Holder)
			// Held by this very holder (a try whose answer was lost, or a term this
			// process has given up on): take it under a new term, which fences the old.
			if held.Holder.ID == "" || held.Holder.ID != holder.ID {
				return held
			}
		}
		term++
		if _, err := tx.Exec(ctx, `UPDATE quotashare_lease SET term = $1, holder = $2,
			expires = clock_timestamp() + $3 * interval '1 millisecond' WHERE id = 1`, term, who, d.ttl.Milliseconds()); err != nil {
			return err
		}
		l = quotashare.Lease{Term: term, Holder: holder}
		return nil
	})
	if err != nil {
		return quotashare.Lease{}, err
	}
	d.mu.Lock()
	stop, done := d.takeRenewal()
	d.mu.Unlock()
	endRenewal(stop, done)
	d.mu.Lock()
	d.held = &l
	d.deadline = sent.Add(d.ttl - d.safety())
	d.stop, d.done, d.lost, d.lostWhy = make(chan struct{}), make(chan struct{}), make(chan struct{}), nil
	go d.renew(l, d.stop, d.done, d.lost)
	d.mu.Unlock()
	return l, nil
}

// takeRenewal detaches the renewal of a held lease, for endRenewal to end once d.mu is
// released: the renewal takes d.mu itself, so waiting for it with d.mu held would never
// end. d.mu is held.
func (d *DB) takeRenewal() (stop, done chan struct{}) {
	stop, done = d.stop, d.done
	d.stop, d.done = nil, nil
	return stop, done
}

// endRenewal stops a renewal takeRenewal detached and waits until it has ended.
func endRenewal(stop, done chan struct{}) {
	if stop != nil {
		close(stop)
		<-done
	}
}

// safety is how long before the database's earliest expiry this handle stops trusting
// its lease: time for the executor calls in flight to end before a standby may act.
func (d *DB) safety() time.Duration { return d.ttl / 4 }

// renew extends the lease every third of its time to live until stopped, or until the
// lease is found lost: another replica took it, or no renewal got through before the
// deadline (the database unreachable), so that a standby may take it soon. Then lost
// is closed.
func (d *DB) renew(l quotashare.Lease, stop, done, lost chan struct{}) {
	defer close(done)
	t := time.NewTicker(d.ttl / 3)
	defer t.Stop()
	d.mu.Lock()
	deadline := d.deadline
	d.mu.Unlock()
	expiry := time.NewTimer(time.Until(deadline))
	defer expiry.Stop()
	var last error // the last renewal's failure
	for {
		select {
		case <-stop:
			return
		case <-expiry.C:
			d.lose(lost, fmt.Errorf("no renewal of the lease got through for %v (the last failed: %v); a standby may take it over", d.ttl-d.safety(), last))
			return
		case <-t.C:
		}
		sent := time.Now()
		until := sent.Add(d.ttl / 3)
		if deadline.Before(until) {
			until = deadline
		}
		ctx, cancel := context.WithDeadline(context.Background(), until)
		ok, err := d.extend(ctx, l)
		cancel()
		switch {
		case err != nil:
			last = err // tried again at the next tick
		case !ok:
			d.lose(lost, errors.New("another replica took the lease over, or it expired before a renewal got through"))
			return
		default:
			deadline = sent.Add(d.ttl - d.safety())
			if d.extended != nil {
				d.extended()
			}
			d.mu.Lock()
			d.deadline = deadline
			d.mu.Unlock()
			expiry.Reset(time.Until(deadline))
			if d.renewed != nil {
				d.renewed()
			}
		}
	}
}

// lose records why the lease is lost and closes lost.
func (d *DB) lose(lost chan struct{}, why error) {
	d.mu.Lock()
	d.lostWhy = why
	d.mu.Unlock()
	close(lost)
}

// Deadline is when this handle stops trusting the lease it holds unless a renewal gets
// through first (zero while it holds none): until then, and no longer, the server may
// act, and its local executor's attempts may run (the server writes it into their fence).
func (d *DB) Deadline() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held == nil {
		return time.Time{}
	}
	return d.deadline
}

// LostCause says why Lost was closed.
func (d *DB) LostCause() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lostWhy
}

// extend renews the lease if it is still l's and unexpired.
func (d *DB) extend(ctx context.Context, l quotashare.Lease) (bool, error) {
	tag, err := d.pool.Exec(ctx, `UPDATE quotashare_lease SET expires = clock_timestamp() + $2 * interval '1 millisecond'
		WHERE id = 1 AND term = $1 AND holder IS NOT NULL AND expires > clock_timestamp()`, l.Term, d.ttl.Milliseconds())
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// Lost is closed once the lease this handle holds is found lost to another replica or to
// its expiry; nil while no lease is held.
func (d *DB) Lost() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lost
}

// Release gives the lease up if it is still held under that term.
func (d *DB) Release(ctx context.Context, lease quotashare.Lease) error {
	d.mu.Lock()
	var stop, done chan struct{}
	if d.held != nil && d.held.Term == lease.Term {
		stop, done = d.takeRenewal()
		d.held = nil
	}
	d.mu.Unlock()
	endRenewal(stop, done)
	_, err := d.pool.Exec(ctx, `UPDATE quotashare_lease SET holder = NULL, expires = clock_timestamp()
		WHERE id = 1 AND term = $1`, lease.Term)
	return err
}

// Load calls fn for every object in kind, key order, from one snapshot.
func (d *DB) Load(ctx context.Context, fn func(quotashare.Record) error) error {
	return pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT kind, key, body FROM quotashare_objects ORDER BY kind, key`)
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
	})
}

// Commit writes the batch in one transaction under the lease. The lease row is locked
// for the transaction: a replica taking the lease over waits for it, and then this
// lease's commits fail.
func (d *DB) Commit(ctx context.Context, lease quotashare.Lease, batch []quotashare.Record) error {
	d.mu.Lock()
	mine := d.held != nil && d.held.Term == lease.Term
	deadline := d.deadline
	d.mu.Unlock()
	if !mine {
		return fmt.Errorf("term %d is not a lease this server holds: %w", lease.Term, quotashare.ErrLeaseLost)
	}
	if !time.Now().Before(deadline) {
		return fmt.Errorf("term %d: no renewal got through before the lease's deadline: %w", lease.Term, quotashare.ErrLeaseLost)
	}
	// A commit that cannot end before the deadline would land when a standby may act.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// The last record of a key wins; each key is written once.
	last := make(map[[2]string]int, len(batch))
	for i, r := range batch {
		if r.Kind == "" || r.Key == "" {
			return fmt.Errorf("record %d: kind and key must not be empty (kind %q, key %q)", i, r.Kind, r.Key)
		}
		last[[2]string{r.Kind, r.Key}] = i
	}
	var putKind, putKey, delKind, delKey []string
	var putBody [][]byte
	for i, r := range batch {
		if last[[2]string{r.Kind, r.Key}] != i {
			continue
		}
		if r.Body == nil {
			delKind, delKey = append(delKind, r.Kind), append(delKey, r.Key)
		} else {
			putKind, putKey, putBody = append(putKind, r.Kind), append(putKey, r.Key), append(putBody, r.Body)
		}
	}
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		fence := b.Queue(`SELECT 1 FROM quotashare_lease WHERE id = 1 AND term = $1 AND holder IS NOT NULL
			AND expires > clock_timestamp() FOR UPDATE`, lease.Term)
		var held bool
		fence.QueryRow(func(row pgx.Row) error {
			var one int
			err := row.Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			held = err == nil
			return err
		})
		if len(delKind) > 0 {
			b.Queue(`DELETE FROM quotashare_objects o USING unnest($1::text[], $2::text[]) AS d(kind, key)
				WHERE o.kind = d.kind AND o.key = d.key`, delKind, delKey)
		}
		if len(putKind) > 0 {
			b.Queue(`INSERT INTO quotashare_objects (kind, key, body)
				SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[])
				ON CONFLICT (kind, key) DO UPDATE SET body = excluded.body`, putKind, putKey, putBody)
		}
		// The fence runs first: a batch under a lost lease is rolled back whatever the
		// later statements did.
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if !held {
			return fmt.Errorf("term %d: %w", lease.Term, quotashare.ErrLeaseLost)
		}
		return nil
	})
	if err != nil && ctx.Err() != nil && !time.Now().Before(deadline) {
		return fmt.Errorf("term %d: the commit did not end before the lease's deadline (%v): %w", lease.Term, err, quotashare.ErrLeaseLost)
	}
	return err
}

// Close releases the lease, if held, and closes the connections.
func (d *DB) Close() error {
	d.close.Do(func() {
		d.mu.Lock()
		held := d.held
		d.mu.Unlock()
		if held != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			d.Release(ctx, *held)
			cancel()
		}
		d.pool.Close()
	})
	return nil
}
