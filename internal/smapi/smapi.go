// Package smapi answers the SageMaker API's DescribeTrainingJob for the training jobs
// quotashare runs: each attempt of a SageMaker-training service job is the training job
// its serviceResourceId names (arn:aws:sagemaker:...:training-job/<attempt id>). The
// SageMaker Python SDK's TrainingQueue reads that ARN from DescribeServiceJob, then asks
// SageMaker for the job's ModelArtifacts. Requests are told apart by their SigV4
// credential scope (sagemaker); the protocol is AWS JSON 1.1 (X-Amz-Target).
package smapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/batchapi"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/trainingjob"
)

// Is says whether a request's credential scope names the service sagemaker.
func Is(r *http.Request) bool { return batchapi.ScopeService(r) == "sagemaker" }

// Config is what the handler needs.
type Config struct {
	Verifier *batchapi.Verifier // nil: every signature passes
	State    control.Viewer
	ARNs     batchapi.ARNs
}

// Handler answers DescribeTrainingJob; any other operation is refused, naming it.
func Handler(cfg Config) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, batchapi.MaxBody))
		if err != nil {
			fail(w, http.StatusBadRequest, "ValidationException", "request body: "+err.Error())
			return
		}
		if cfg.Verifier != nil {
			if _, err := cfg.Verifier.VerifyService(r, "sagemaker", body); err != nil {
				fail(w, http.StatusForbidden, batchapi.AuthErrorCode(err), err.Error())
				return
			}
		}
		op, _ := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "SageMaker.")
		if op != "DescribeTrainingJob" {
			fail(w, http.StatusBadRequest, "UnknownOperationException", fmt.Sprintf("%q is not served: quotashare answers SageMaker's DescribeTrainingJob for the training jobs its queues run", r.Header.Get("X-Amz-Target")))
			return
		}
		var in struct {
			TrainingJobName string `json:"TrainingJobName"`
		}
		if err := json.Unmarshal(body, &in); err != nil || in.TrainingJobName == "" {
			fail(w, http.StatusBadRequest, "ValidationException", "TrainingJobName: required, the name a service job's serviceResourceId ARN ends in")
			return
		}
		name := in.TrainingJobName
		if i := strings.LastIndex(name, ":training-job/"); i >= 0 {
			name = name[i+len(":training-job/"):] // an ARN given as the name
		}
		jobID, _, ok := quotashare.ParseAttemptID(name)
		var out map[string]any
		if ok {
			err = cfg.State.View(func(st *control.State) error {
				j, err := st.Job(jobID)
				if err != nil {
					return err
				}
				out, err = describe(cfg.ARNs, j, name)
				return err
			})
		}
		if !ok || err != nil {
			fail(w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("Requested resource not found: training job %s is no attempt of a job this server holds", in.TrainingJobName))
			return
		}
		b, _ := json.Marshal(out)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Write(b)
	})
}

// describe is the training job of a job's attempt, as DescribeTrainingJob answers it.
func describe(arns batchapi.ARNs, j quotashare.Job, attempt string) (map[string]any, error) {
	var a *quotashare.Attempt
	status, secondary, failure := "", "", ""
	switch {
	case j.Current != nil && j.Current.ID == attempt:
		a, status, secondary = j.Current, "InProgress", "Training"
		if a.StartedAt.IsZero() {
			secondary = "Starting"
		}
		if a.Stop != "" {
			status, secondary = "Stopping", "Stopping"
		}
	default:
		for i := range j.Preempted {
			if j.Preempted[i].ID == attempt {
				a, status, secondary = &j.Preempted[i], "Stopped", "Interrupted"
			}
		}
		for i := range j.Attempts {
			if j.Attempts[i].ID == attempt {
				a = &j.Attempts[i]
				last := i == len(j.Attempts)-1
				switch {
				case last && j.Status == quotashare.Succeeded:
					status, secondary = "Completed", "Completed"
				case a.Stop == quotashare.StopTerminated:
					status, secondary = "Stopped", "Stopped"
				default:
					status, secondary, failure = "Failed", "Failed", a.StatusReason
				}
			}
		}
	}
	if a == nil {
		return nil, fmt.Errorf("no attempt %s", attempt)
	}
	req, err := trainingjob.Parse(j.Payload)
	if err != nil {
		return nil, err
	}
	out := map[string]any{
		"TrainingJobName":   attempt,
		"TrainingJobArn":    arns.TrainingJob(attempt),
		"TrainingJobStatus": status,
		"SecondaryStatus":   secondary,
		"CreationTime":      epoch(a.ScheduledAt),
		"LastModifiedTime":  epoch(cmp.Or(a.StoppedAt, a.StartedAt, a.ScheduledAt)),
		"AlgorithmSpecification": map[string]any{"TrainingInputMode": "File",
			"TrainingImage": req.AlgorithmSpecification.TrainingImage, "ContainerEntrypoint": req.AlgorithmSpecification.ContainerEntrypoint,
			"ContainerArguments": req.AlgorithmSpecification.ContainerArguments},
		"ResourceConfig":    req.ResourceConfig,
		"StoppingCondition": map[string]any{"MaxRuntimeInSeconds": req.StoppingCondition.MaxRuntimeInSeconds},
		"HyperParameters":   req.HyperParameters,
		"InputDataConfig":   req.InputDataConfig,
		"Environment":       req.Environment,
	}
	if !a.StartedAt.IsZero() {
		out["TrainingStartTime"] = epoch(a.StartedAt)
	}
	if !a.StoppedAt.IsZero() {
		out["TrainingEndTime"] = epoch(a.StoppedAt)
		if !a.StartedAt.IsZero() {
			out["TrainingTimeInSeconds"] = int(a.StoppedAt.Sub(a.StartedAt).Seconds())
			out["BillableTimeInSeconds"] = out["TrainingTimeInSeconds"]
		}
	}
	if req.RoleArn != "" {
		out["RoleArn"] = req.RoleArn // the SageMaker SDK rebuilds a ModelTrainer with it
	}
	if failure != "" {
		out["FailureReason"] = failure
	}
	if o := req.OutputDataConfig; o != nil && o.S3OutputPath != "" {
		out["OutputDataConfig"] = map[string]any{"S3OutputPath": o.S3OutputPath, "CompressionType": cmp.Or(o.CompressionType, "GZIP")}
		if uri, ok := trainingjob.ModelArtifacts(req, j.Name, j.ID); ok && status == "Completed" {
			out["ModelArtifacts"] = map[string]any{"S3ModelArtifacts": uri} // where the local executor put it
		}
	}
	if c := req.CheckpointConfig; c != nil {
		out["CheckpointConfig"] = map[string]any{"S3Uri": c.S3Uri, "LocalPath": cmp.Or(c.LocalPath, trainingjob.DefaultCheckpointPath)}
	}
	return out, nil
}

// epoch is a timestamp as AWS JSON carries it: seconds since 1970, with a fraction.
func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func fail(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]string{"__type": typ, "message": msg})
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	w.Write(b)
}
