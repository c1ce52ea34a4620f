// Package trainingjob decodes the SageMaker CreateTrainingJob request that a service job
// carries as its serviceRequestPayload: the capacity it needs, and what the executors run.
// It knows nothing of the server or the executors.
package trainingjob

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/quotashare/quotashare"
)

// MaxPayload is AWS's limit on serviceRequestPayload: 10 KiB.
const MaxPayload = 10 * 1024

// MaxInstanceCount bounds each InstanceCount, so that counts summed per type (a 10 KiB
// payload holds a few hundred groups) cannot overflow; the scheduling core's own bound
// on a job's instances is lower still.
const MaxInstanceCount = 1 << 20

func cutText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// Request is the parsed payload: the root's TrainingRequest, decoded by Parse.
type Request = quotashare.TrainingRequest

// Channel is one InputDataConfig channel.
type Channel = quotashare.TrainingChannel

// Parse decodes a payload. Errors name the field and the rule.
func Parse(payload string) (*Request, error) {
	if len(payload) > MaxPayload {
		return nil, fmt.Errorf("serviceRequestPayload: %d bytes is more than the %d allowed", len(payload), MaxPayload)
	}
	var r Request
	dec := json.NewDecoder(bytes.NewReader([]byte(payload)))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("serviceRequestPayload: must be a SageMaker CreateTrainingJob request in JSON: %v", err)
	}
	if rest := strings.TrimSpace(payload[dec.InputOffset():]); rest != "" {
		return nil, fmt.Errorf("serviceRequestPayload: must be one JSON object, found %q after it", cutText(rest, 20))
	}
	for _, k := range slices.Sorted(maps.Keys(r.Environment)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("serviceRequestPayload.Environment: the name %q must be non-empty, without '=' or NUL", k)
		}
		if strings.ContainsRune(r.Environment[k], 0) {
			return nil, fmt.Errorf("serviceRequestPayload.Environment[%q]: the value must not hold a NUL", k)
		}
	}
	for k, v := range r.HyperParameters {
		if strings.ContainsRune(k, 0) || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("serviceRequestPayload.HyperParameters: %q must not hold a NUL", k)
		}
	}
	if c := r.CheckpointConfig; c != nil {
		if _, _, err := ParseS3URI(c.S3Uri); err != nil {
			return nil, fmt.Errorf("serviceRequestPayload.CheckpointConfig.S3Uri: %w", err)
		}
		if c.LocalPath != "" && (!strings.HasPrefix(c.LocalPath, "/") || path.Clean(c.LocalPath) != c.LocalPath) {
			return nil, fmt.Errorf("serviceRequestPayload.CheckpointConfig.LocalPath: %q must be an absolute, clean path (default %s)", c.LocalPath, DefaultCheckpointPath)
		}
	}
	if o := r.OutputDataConfig; o != nil {
		if o.S3OutputPath != "" {
			if _, _, err := ParseS3URI(o.S3OutputPath); err != nil {
				return nil, fmt.Errorf("serviceRequestPayload.OutputDataConfig.S3OutputPath: %w", err)
			}
		}
		if c := o.CompressionType; c != "" && c != "GZIP" && c != "NONE" {
			return nil, fmt.Errorf("serviceRequestPayload.OutputDataConfig.CompressionType: %q must be GZIP or NONE", c)
		}
	}
	for i, c := range r.InputDataConfig {
		if s3 := c.DataSource.S3DataSource; s3 != nil && strings.HasPrefix(s3.S3Uri, "s3:") {
			if _, _, err := ParseS3URI(s3.S3Uri); err != nil {
				return nil, fmt.Errorf("serviceRequestPayload.InputDataConfig[%d].DataSource.S3DataSource.S3Uri: %w", i, err)
			}
		}
		if s3 := c.DataSource.S3DataSource; s3 != nil {
			if t := s3.S3DataType; t != "" && t != "S3Prefix" {
				return nil, fmt.Errorf("serviceRequestPayload.InputDataConfig[%d].DataSource.S3DataSource.S3DataType: %q is not supported; quotashare stages S3Prefix channels (every object under S3Uri)", i, t)
			}
			if d := s3.S3DataDistributionType; d != "" && d != "FullyReplicated" && d != "ShardedByS3Key" {
				return nil, fmt.Errorf("serviceRequestPayload.InputDataConfig[%d].DataSource.S3DataSource.S3DataDistributionType: %q must be FullyReplicated or ShardedByS3Key", i, d)
			}
		}
		if !channelName.MatchString(c.ChannelName) || c.ChannelName == "." || c.ChannelName == ".." {
			return nil, fmt.Errorf("serviceRequestPayload.InputDataConfig[%d].ChannelName: %q must be 1-64 letters, digits, '.', '-' or '_' (SageMaker's rule; it is a folder under /opt/ml/input/data)", i, c.ChannelName)
		}
	}
	if m := r.StoppingCondition.MaxRuntimeInSeconds; m < 0 || m > math.MaxInt32 {
		return nil, fmt.Errorf("serviceRequestPayload.StoppingCondition.MaxRuntimeInSeconds: %d must be from 1 to %d", m, math.MaxInt32)
	}
	return &r, nil
}

// channelName is SageMaker's rule for a ChannelName.
var channelName = regexp.MustCompile(`^[A-Za-z0-9.\-_]{1,64}$`)

// DefaultCheckpointPath is CheckpointConfig.LocalPath when the payload gives none.
const DefaultCheckpointPath = "/opt/ml/checkpoints"

// CheckpointPath is where the request's checkpoints are kept in the container, or "".
func CheckpointPath(r *Request) string {
	if r.CheckpointConfig == nil {
		return ""
	}
	if p := r.CheckpointConfig.LocalPath; p != "" {
		return p
	}
	return DefaultCheckpointPath
}

// OutputBase is where a job's outputs go under its OutputDataConfig, as SageMaker puts
// them: the bucket, and the key prefix <S3OutputPath's prefix>/<JobName>/output. ok is
// false without an S3OutputPath.
func OutputBase(r *Request, jobName, jobID string) (bucket, base string, ok bool) {
	o := r.OutputDataConfig
	if o == nil || o.S3OutputPath == "" {
		return "", "", false
	}
	bucket, prefix, _ := ParseS3URI(o.S3OutputPath) // checked at submit
	return bucket, path.Join(prefix, JobName(r, jobName, jobID), "output"), true
}

// JobName is the training job's name, as its container sees it (TRAINING_JOB_NAME) and
// its outputs are named: the payload's TrainingJobName, else the service job's name,
// else its id.
func JobName(r *Request, jobName, jobID string) string {
	return cmp.Or(r.TrainingJobName, jobName, jobID)
}

// ModelArtifacts is where a successful attempt's /opt/ml/model is kept (OutputBase's
// model.tar.gz, or its folder model/ when CompressionType is NONE): SageMaker's
// ModelArtifacts.S3ModelArtifacts.
func ModelArtifacts(r *Request, jobName, jobID string) (string, bool) {
	bucket, base, ok := OutputBase(r, jobName, jobID)
	if !ok {
		return "", false
	}
	if r.OutputDataConfig.CompressionType == "NONE" {
		return "s3://" + bucket + "/" + path.Join(base, "model") + "/", true
	}
	return "s3://" + bucket + "/" + path.Join(base, "model.tar.gz"), true
}

// ParseS3URI splits s3://bucket/prefix, checking the bucket's name as S3 does (3 to 63
// lower-case letters, digits, dots and hyphens, starting and ending with a letter or a
// digit). The prefix may be empty.
func ParseS3URI(uri string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q must be of the form s3://bucket/prefix", uri)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if n := len(bucket); n < 3 || n > 63 {
		return "", "", fmt.Errorf("%q: the bucket name %q must be 3 to 63 characters", uri, bucket)
	}
	for i, c := range bucket {
		letter := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !letter && (c != '.' && c != '-' || i == 0 || i == len(bucket)-1) {
			return "", "", fmt.Errorf("%q: the bucket name %q may hold only lower-case letters, digits, dots and hyphens, and must start and end with a letter or digit", uri, bucket)
		}
	}
	if strings.ContainsRune(prefix, 0) {
		return "", "", fmt.Errorf("%q: the key prefix must not hold a NUL", uri)
	}
	return bucket, prefix, nil
}

// Need is the capacity the request asks for: ResourceConfig's InstanceCount of
// InstanceType, or its InstanceGroups summed per type, sorted by type.
func Need(r *Request) ([]quotashare.Demand, error) {
	rc := r.ResourceConfig
	if rc == nil {
		return nil, fmt.Errorf("serviceRequestPayload.ResourceConfig: is required: it says which instance type and how many instances the job needs")
	}
	counts := map[string]int{}
	if len(rc.InstanceGroups) > 0 {
		if rc.InstanceType != "" {
			return nil, fmt.Errorf("serviceRequestPayload.ResourceConfig: give InstanceType and InstanceCount, or InstanceGroups, not both")
		}
		for i, g := range rc.InstanceGroups {
			if g.InstanceType == "" || g.InstanceCount < 1 {
				return nil, fmt.Errorf("serviceRequestPayload.ResourceConfig.InstanceGroups[%d]: needs an InstanceType and an InstanceCount of at least 1", i)
			}
			if g.InstanceCount > MaxInstanceCount {
				return nil, fmt.Errorf("serviceRequestPayload.ResourceConfig.InstanceGroups[%d].InstanceCount: %d is more than %d", i, g.InstanceCount, MaxInstanceCount)
			}
			counts[g.InstanceType] += g.InstanceCount
		}
	} else {
		if rc.InstanceType == "" {
			return nil, fmt.Errorf("serviceRequestPayload.ResourceConfig.InstanceType: is required")
		}
		if rc.InstanceCount < 1 {
			return nil, fmt.Errorf("serviceRequestPayload.ResourceConfig.InstanceCount: must be at least 1, got %d", rc.InstanceCount)
		}
		if rc.InstanceCount > MaxInstanceCount {
			return nil, fmt.Errorf("serviceRequestPayload.ResourceConfig.InstanceCount: %d is more than %d", rc.InstanceCount, MaxInstanceCount)
		}
		counts[rc.InstanceType] = rc.InstanceCount
	}
	var need []quotashare.Demand
	for t, n := range counts {
		need = append(need, quotashare.Demand{InstanceType: t, Count: n})
	}
	slices.SortFunc(need, func(a, b quotashare.Demand) int { return strings.Compare(a.InstanceType, b.InstanceType) })
	return need, nil
}

// Instances expands an attempt's capacity into one entry per instance, in the order the
// executors number them: host algo-1, algo-2, ... and the instance type of each.
func Instances(need []quotashare.Demand) (hosts, types []string) {
	for _, d := range need {
		for range d.Count {
			types = append(types, d.InstanceType)
			hosts = append(hosts, fmt.Sprintf("algo-%d", len(types)))
		}
	}
	return hosts, types
}

// Limit is an attempt's run-time limit, the smaller of timeoutConfig and the payload's
// StoppingCondition.MaxRuntimeInSeconds, and which of them it is; zero means none.
func Limit(spec quotashare.AttemptSpec) (time.Duration, string) {
	d, what := spec.Timeout, "timeoutConfig.attemptDurationSeconds"
	if req := spec.Request; req != nil {
		if m := time.Duration(req.StoppingCondition.MaxRuntimeInSeconds) * time.Second; m > 0 && (d <= 0 || m < d) {
			d, what = m, "StoppingCondition.MaxRuntimeInSeconds"
		}
	}
	return d, what
}

// TimeLeft is how long an attempt has left of its run-time limit at now (at least zero;
// the whole limit before it started), and false when it has none.
func TimeLeft(spec quotashare.AttemptSpec, now time.Time) (time.Duration, bool) {
	d, _ := Limit(spec)
	if d <= 0 {
		return 0, false
	}
	if !spec.StartedAt.IsZero() {
		d -= now.Sub(spec.StartedAt)
	}
	return max(d, 0), true
}

// Paths says where an instance finds its folders, for Env.
type Paths struct {
	Model, OutputData string
	// Channel is where a channel's data is, or "" when the executor does not provide it.
	Channel func(Channel) string
}

// Env is the environment SageMaker gives a training container: the request's
// Environment, then SM_CURRENT_HOST, SM_HOSTS, SM_HPS and SM_HP_<NAME>, SM_MODEL_DIR,
// SM_OUTPUT_DIR (where a failing job writes its reason, in the file "failure"),
// SM_OUTPUT_DATA_DIR, SM_CURRENT_INSTANCE_TYPE, SM_CHANNELS and SM_CHANNEL_<NAME>.
func Env(r *Request, host string, hosts []string, instanceType string, p Paths) map[string]string {
	env := map[string]string{}
	for k, v := range r.Environment {
		env[k] = v
	}
	hostsJSON, _ := json.Marshal(hosts)
	hps := r.HyperParameters
	if hps == nil {
		hps = map[string]string{}
	}
	hpsJSON, _ := json.Marshal(hps)
	env["SM_CURRENT_HOST"] = host
	env["SM_HOSTS"] = string(hostsJSON)
	env["SM_HPS"] = string(hpsJSON)
	for k, v := range hps {
		env["SM_HP_"+strings.ToUpper(EnvName(k))] = v
	}
	env["SM_MODEL_DIR"] = p.Model
	env["SM_OUTPUT_DIR"] = path.Dir(p.OutputData) // <ml>/output, as the SageMaker training toolkit sets it
	env["SM_OUTPUT_DATA_DIR"] = p.OutputData
	env["SM_CURRENT_INSTANCE_TYPE"] = instanceType
	channels := []string{}
	for _, c := range r.InputDataConfig {
		if path := p.Channel(c); path != "" {
			env["SM_CHANNEL_"+strings.ToUpper(EnvName(c.ChannelName))] = path
			channels = append(channels, c.ChannelName)
		}
	}
	chJSON, _ := json.Marshal(channels)
	env["SM_CHANNELS"] = string(chJSON)
	return env
}

// EnvName turns a channel or hyperparameter name into an environment variable's part.
func EnvName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, s)
}
