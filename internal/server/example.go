package server

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/dispatch"
)

// Example names: AWS's three-project example, one ml.g5.xlarge per project.
const (
	ExampleQueue = "three-projects"
	exampleType  = "ml.g5.xlarge"
)

// ApplyExample creates the three-project setup where it is missing: a quota-share
// policy, an environment of 3 ml.g5.xlarge, a queue, and the shares qs1
// (LEND_AND_BORROW, borrowLimit 200, in-share preemption), qs2 (LEND) and qs3 (RESERVE).
func ApplyExample(e *dispatch.Engine) error {
	exists := func(err error) error {
		if err != nil && quotashare.KindOf(err) == quotashare.Conflict {
			return nil
		}
		return err
	}
	p, err := e.CreatePolicy(dispatch.PolicyInput{Name: "three-projects-policy", QuotaShare: true, IdleStrategy: "FIFO"})
	if err = exists(err); err != nil {
		return err
	}
	if p.ARN == "" {
		p.ARN = e.PolicyARNs()[0]
		for _, a := range e.PolicyARNs() {
			if nameOf(a) == "three-projects-policy" {
				p.ARN = a
			}
		}
	}
	if _, err := e.CreateEnvironment(dispatch.EnvironmentInput{Name: "three-projects-env", Type: "SAGEMAKER_TRAINING",
		Limits: []quotashare.Demand{{InstanceType: exampleType, Count: 3}}}); exists(err) != nil {
		return err
	}
	prio := 1
	if _, err := e.CreateQueue(dispatch.QueueInput{Name: ExampleQueue, Type: "SAGEMAKER_TRAINING", Priority: &prio, PolicyARN: p.ARN,
		EnvOrder: []dispatch.EnvOrder{{Order: 1, Environment: "three-projects-env"}}}); exists(err) != nil {
		return err
	}
	two := 200
	for _, s := range []dispatch.ShareInput{
		{Name: "qs1", Strategy: quotashare.LendAndBorrow, BorrowLimit: &two, InSharePreemption: "ENABLED"},
		{Name: "qs2", Strategy: quotashare.Lend, InSharePreemption: "DISABLED"},
		{Name: "qs3", Strategy: quotashare.Reserve, InSharePreemption: "DISABLED"},
	} {
		s.Queue = ExampleQueue
		s.Limits = []quotashare.Demand{{InstanceType: exampleType, Count: 1}}
		if _, err := e.CreateShare(s); exists(err) != nil {
			return err
		}
	}
	return nil
}

func nameOf(arn string) string {
	for i := len(arn) - 1; i >= 0; i-- {
		if arn[i] == '/' {
			return arn[i+1:]
		}
	}
	return arn
}

// ExamplePayload is a CreateTrainingJob request for one ml.g5.xlarge that runs a shell
// script: it prints, works for the given time, and on SIGTERM writes a checkpoint.
func ExamplePayload(name string, seconds int) string {
	script := fmt.Sprintf(`trap 'echo "$(date +%%T) checkpoint" > "$SM_MODEL_DIR/checkpoint"; echo preempted, checkpoint written; exit 143' TERM
echo "training %s on $SM_CURRENT_HOST"; i=0; while [ $i -lt %d ]; do sleep 1; i=$((i+1)); done; echo done`, name, seconds)
	b, _ := json.Marshal(map[string]any{
		"TrainingJobName":        name,
		"AlgorithmSpecification": map[string]any{"TrainingInputMode": "File", "ContainerEntrypoint": []string{"sh", "-c", script}},
		"ResourceConfig":         map[string]any{"InstanceType": exampleType, "InstanceCount": 1, "VolumeSizeInGB": 1},
		"StoppingCondition":      map[string]any{"MaxRuntimeInSeconds": 3600},
	})
	return string(b)
}

// RunExample plays AWS's three-project walkthrough against the engine: qs1 submits three
// jobs (one runs on its own instance, one borrows qs2's idle instance, qs3's is never
// lent); qs2 comes back and reclaims its instance; qs1's lowest job is raised above its
// highest and displaces it. Each step waits for the previous one to take effect.
func RunExample(e *dispatch.Engine, say func(string)) error {
	submit := func(name, share string, prio, secs int) (string, error) {
		j, err := e.Submit(dispatch.JobInput{Name: name, Queue: ExampleQueue, Type: "SAGEMAKER_TRAINING", Share: share,
			Priority: &prio, Payload: ExamplePayload(name, secs)})
		return j.ID, err
	}
	wait := func(id string, want ...quotashare.JobStatus) {
		for range 600 {
			j, err := e.Job(id)
			if err == nil {
				for _, w := range want {
					if j.Status == w {
						return
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	say("1. qs1 submits three jobs, priorities 3, 2 and 1")
	high, err := submit("qs1_job_high", "qs1", 3, 12)
	if err != nil {
		return err
	}
	med, _ := submit("qs1_job_med", "qs1", 2, 8)
	low, _ := submit("qs1_job_low", "qs1", 1, 6)
	wait(high, quotashare.Running)
	wait(med, quotashare.Running)
	j, _ := e.Job(low)
	say("   qs1_job_low waits: " + j.StatusReason)
	say("2. qs2 submits a job: its lent instance comes back by preemption")
	q2, err := submit("qs2_job_1", "qs2", 1, 4)
	if err != nil {
		return err
	}
	wait(q2, quotashare.Running)
	j, _ = e.Job(med)
	say("   qs1_job_med is " + string(j.Status) + ": " + j.StatusReason)
	say("3. qs1_job_low is raised to priority 4: in-share preemption")
	if _, err := e.SetPriority(low, 4); err != nil {
		return err
	}
	wait(low, quotashare.Running)
	j, _ = e.Job(high)
	say("   qs1_job_high is " + string(j.Status) + ": " + j.StatusReason)
	say("4. every job runs to the end in turn")
	for _, id := range []string{q2, low, high, med} {
		wait(id, quotashare.Succeeded, quotashare.Failed)
		j, _ := e.Job(id)
		say(fmt.Sprintf("   %s %s after %d preemption(s)", j.Name, j.Status, j.PreemptedCount))
	}
	say("the example is done; the server keeps running (Ctrl-C stops it)")
	return nil
}
