package quotashare

import "time"

// AttemptSpec is what an executor needs to run one attempt of a job.
type AttemptSpec struct {
	JobID, JobName, AttemptID, Share string
	// Queue is the job queue of the job's share.
	Queue string
	// Payload is the job's SageMaker CreateTrainingJob request (JSON), as submitted, and
	// Request the same parsed.
	Payload string
	Request *TrainingRequest
	Need    []Demand
	// Timeout bounds the attempt's run time (timeoutConfig and MaxRuntimeInSeconds, the
	// smaller); zero means none.
	Timeout time.Duration
	// StartedAt is when the attempt was started, for Recover.
	StartedAt time.Time
	// Stopping is set, for Recover, on an attempt the server was stopping.
	Stopping bool
	// Launch numbers the server's decisions to start an attempt (from 1, across jobs;
	// 0 for an attempt handed to Recover): the store counts them, and an executor that
	// records it (LaunchRecorder) shows a store that lost its last commits.
	Launch int64
}

// ReportState is what an executor reports of an attempt.
type ReportState int

// The attempt states an executor reports.
const (
	// AttemptRunning: every process of the attempt has been started.
	AttemptRunning ReportState = iota + 1
	// AttemptExited: every process of the attempt is gone.
	AttemptExited
	// AttemptStarting: the attempt is launched but not every process runs yet (a Pod
	// waits for a node or pulls its image); Detail says what it waits for. A later
	// Starting report with another reason replaces it.
	AttemptStarting
)

// Report is an executor's word about an attempt.
type Report struct {
	JobID, AttemptID string
	State            ReportState
	At               time.Time
	// Success: every process exited 0 (AttemptExited only).
	Success bool
	// ExitCode is the first non-zero exit code, if a process exited with one.
	ExitCode *int
	// Kind says how the attempt ended (AttemptExited only).
	Kind ExitKind
	// Cause is the finer code of a host's or capacity failure (Kind HOST or CAPACITY):
	// LAUNCH_FAILED, FENCED, DISK_FULL, INSUFFICIENT_INSTANCE_CAPACITY.
	Cause string
	// Detail is what happened, in the executor's words and without the kind: the exit
	// codes and the last lines of output, a Pod's status. For a RUNNING or STARTING
	// report, how the attempt starts (what it waits for, the checkpoint it resumed from).
	// Reason renders the sentence of the two.
	Detail string
	// Signalled: the attempt was still running when the executor sent it SIGTERM for a
	// Stop or a timeout. An attempt that had finished on its own before the signal is not
	// signalled, whatever the server asked meanwhile.
	Signalled bool
	// Capacity marks an attempt that could not run for lack of capacity on the executor's
	// side (no free GPUs): the job is requeued without using up a retry attempt.
	Capacity bool
	// Resumed marks a RUNNING attempt that started from a checkpoint of the job's (its
	// CheckpointConfig's objects were there): the run time of the job's last preempted
	// attempt is then counted as saved rather than lost.
	Resumed bool
}

// Reason is the report's statusReason, rendered from its kind, cause and detail in this
// one place: "AlgorithmError: algo-1 exit code 1 ...", "HOST:DISK_FULL - ...", or the
// detail alone for a report without a kind (RUNNING, STARTING).
func (r Report) Reason() string {
	switch {
	case r.Kind == "":
		return r.Detail
	case r.Cause != "":
		return string(r.Kind) + ":" + r.Cause + " - " + r.Detail
	case r.Detail == "":
		return string(r.Kind)
	}
	return string(r.Kind) + ": " + r.Detail
}

// Executor runs attempts: as processes on this host, or as Pods on a cluster. Every
// method is idempotent for the same attempt id, so the server may repeat a call after a
// restart. Reports go to the callback the executor was built with, from any goroutine.
type Executor interface {
	// Check says whether the executor can run the request; the server calls it at submit
	// and refuses the job with the error (a ClientException naming the field).
	Check(req *TrainingRequest) error
	// Start launches the attempt's processes.
	Start(a AttemptSpec) error
	// Stop asks the attempt's processes to stop: SIGTERM, then SIGKILL after the grace
	// period. Capacity stays held until an AttemptExited report.
	Stop(attemptID string) error
	// Recover is called once at start-up with every attempt the store says holds
	// capacity: the executor adopts those still running, and reports AttemptExited for
	// those that ended while the server was down.
	Recover(as []AttemptSpec) error
	// Close stops watching attempts; it leaves their processes running.
	Close() error
}

// Forgetter is an Executor that keeps something of an attempt once it is over, such as its
// output. The server calls Forget with a job's attempts once it has removed the job (its
// retention ended, or its queue was deleted), and Prune once at start-up, after Recover,
// so that what a crash kept from Forget goes too: keep says whether an attempt's job
// still exists. Both are best effort; an error is logged.
type Forgetter interface {
	Forget(attemptIDs []string) error
	Prune(keep func(attemptID string) bool) (removed int, err error)
}

// Settler is an Executor that keeps what an ended attempt leaves on its side (a
// Kubernetes attempt's Pods and their states) until the server has committed the end it
// reported: the server calls Ended once it has. Were the objects removed sooner, a server
// that died between the report and the commit would leave its successor an attempt the
// store says runs and whose objects are gone, and a finished job would run again.
// Attempts whose end was committed while the executor was not there to hear it are
// cleaned up by the next Recover, as objects of attempts it is not given.
type Settler interface {
	Ended(attemptID string)
}

// ShareChecker is an Executor whose check of a request depends on the share it is
// submitted to (its jobs run as a user of the share's own): the server calls CheckShare
// instead of Check.
type ShareChecker interface {
	CheckShare(req *TrainingRequest, queue, share string) error
}

// LaunchRecorder is an Executor that records, on a disk of its own, each attempt's
// AttemptSpec.Launch as it launches it. The store commits a launch before the executor
// gets it, so a recorded launch above the store's count means the store lost commits
// (a database restored from an old copy, a deleted or cut write-ahead log): the server
// then refuses to start rather than run on with jobs forgotten.
type LaunchRecorder interface {
	// LastLaunch is the highest launch number recorded, with the attempt that has it
	// and where the records are (a folder); 0 for none.
	LastLaunch() (n int64, attemptID, where string)
}
