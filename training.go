package quotashare

import "strings"

// TrainingRequest is the part of a SageMaker CreateTrainingJob request (a service job's
// serviceRequestPayload) that quotashare reads, as internal/trainingjob parses it. The
// payload is otherwise opaque: it is stored and echoed verbatim. It is parsed when the
// job is submitted and when an attempt is built (AttemptSpec.Request); executors read
// this and never parse the payload themselves.
type TrainingRequest struct {
	TrainingJobName string `json:"TrainingJobName"`
	// RoleArn is recorded and answered by DescribeTrainingJob, not assumed: a job runs as
	// its share's job user.
	RoleArn                string `json:"RoleArn"`
	AlgorithmSpecification struct {
		TrainingImage       string   `json:"TrainingImage"`
		ContainerEntrypoint []string `json:"ContainerEntrypoint"`
		ContainerArguments  []string `json:"ContainerArguments"`
	} `json:"AlgorithmSpecification"`
	ResourceConfig *struct {
		InstanceType   string `json:"InstanceType"`
		InstanceCount  int    `json:"InstanceCount"`
		InstanceGroups []struct {
			InstanceType      string `json:"InstanceType"`
			InstanceCount     int    `json:"InstanceCount"`
			InstanceGroupName string `json:"InstanceGroupName"`
		} `json:"InstanceGroups"`
	} `json:"ResourceConfig"`
	StoppingCondition struct {
		MaxRuntimeInSeconds int `json:"MaxRuntimeInSeconds"`
	} `json:"StoppingCondition"`
	Environment     map[string]string `json:"Environment"`
	HyperParameters map[string]string `json:"HyperParameters"`
	InputDataConfig []TrainingChannel `json:"InputDataConfig"`
	// OutputDataConfig is where a successful attempt's /opt/ml/model and
	// /opt/ml/output/data go: <S3OutputPath>/<TrainingJobName>/output/model.tar.gz and
	// output.tar.gz (CompressionType NONE: the files as they are, under model/ and data/).
	OutputDataConfig *struct {
		S3OutputPath    string `json:"S3OutputPath"`
		CompressionType string `json:"CompressionType"`
	} `json:"OutputDataConfig"`
	// CheckpointConfig keeps what the job writes in LocalPath (default
	// /opt/ml/checkpoints) at S3Uri while it runs and when it ends, and puts it back in
	// LocalPath before each attempt: a preempted job resumes from it.
	CheckpointConfig *struct {
		S3Uri     string `json:"S3Uri"`
		LocalPath string `json:"LocalPath"`
	} `json:"CheckpointConfig"`
}

// TrainingChannel is one InputDataConfig channel.
type TrainingChannel struct {
	ChannelName string `json:"ChannelName"`
	DataSource  struct {
		S3DataSource *struct {
			S3Uri string `json:"S3Uri"`
			// S3DataType is S3Prefix (the default): every object under S3Uri.
			S3DataType string `json:"S3DataType"`
			// S3DataDistributionType is FullyReplicated (the default: every instance gets
			// every object) or ShardedByS3Key (instance i of n gets the objects whose
			// index in key order is i modulo n).
			S3DataDistributionType string `json:"S3DataDistributionType"`
		} `json:"S3DataSource"`
		FileSystemDataSource *struct {
			DirectoryPath string `json:"DirectoryPath"`
		} `json:"FileSystemDataSource"`
	} `json:"DataSource"`
}

// S3 is the channel's data in an object store: its s3:// URI, or "" when the channel's
// data is not there (a folder on this host).
func (c TrainingChannel) S3() string {
	if s3 := c.DataSource.S3DataSource; s3 != nil && strings.HasPrefix(s3.S3Uri, "s3://") {
		return s3.S3Uri
	}
	return ""
}

// Sharded says whether the channel's objects are split between the instances
// (ShardedByS3Key) rather than each given all of them.
func (c TrainingChannel) Sharded() bool {
	s3 := c.DataSource.S3DataSource
	return s3 != nil && s3.S3DataDistributionType == "ShardedByS3Key"
}

// LocalPath is the channel's data as a path on this host: a FileSystemDataSource
// directory, or an S3Uri of the form file:///path or /path. Empty when the channel names
// remote data.
func (c TrainingChannel) LocalPath() string {
	if fs := c.DataSource.FileSystemDataSource; fs != nil && strings.HasPrefix(fs.DirectoryPath, "/") {
		return fs.DirectoryPath
	}
	if s3 := c.DataSource.S3DataSource; s3 != nil {
		if p, ok := strings.CutPrefix(s3.S3Uri, "file://"); ok {
			return p
		}
		if strings.HasPrefix(s3.S3Uri, "/") {
			return s3.S3Uri
		}
	}
	return ""
}
