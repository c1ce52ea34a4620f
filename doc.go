// Package quotashare is the domain vocabulary of quotashare, a self-hosted scheduler
// that lets several teams share a fixed pool of GPU training capacity.
//
// The words:
//
//   - A service environment is the physical pool: a capacity limit per instance type.
//   - A quota share is one team's allocation of that pool: a limit per instance type,
//     and a strategy saying what happens to capacity it does not use.
//   - A share's usage U is what its jobs hold (SCHEDULED, STARTING, RUNNING, and attempts
//     being preempted until their processes have stopped). Usage above the limit L is
//     borrowed; a lending share's unused allocation is idle and may be lent.
//   - Reclaim is cross-share preemption: an owner who comes back gets its lent capacity
//     back from the shares that borrowed it.
//   - In-share preemption lets a higher-priority job of a share displace strictly
//     lower-priority jobs of the same share, where the share enables it.
//
// Data flow: API requests are validated and committed to the store; the scheduling core
// (internal/sched) turns the committed state into a plan; the plan is committed and then
// acted on by an executor. This package imports nothing outside the standard library.
package quotashare
