package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"
)

// TestUnknownInstanceType: a job of an instance type that is neither SageMaker Training's
// nor a private one of the server could never run (no capacity limit may name it), so it
// is refused at submit, naming the field and the closest known type, and nothing is made.
func TestUnknownInstanceType(t *testing.T) {
	_, c := start(t, t.TempDir(), time.Second)
	setup(t, c, "q", 1, share("a", "LEND", 1, nil, false))
	for typ, want := range map[string]string{
		"g5.xlarge":      `"g5.xlarge" is not a SageMaker Training instance type; did you mean ml.g5.xlarge?`,
		"ml.g5.xlargee":  `did you mean ml.g5.xlarge?`,
		"ml.zz9.jumbo99": `"ml.zz9.jumbo99" is not a SageMaker Training instance type; serve --instance-types FILE adds private ones`,
	} {
		_, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("j"), JobQueue: aws.String("q"),
			ServiceJobType: types.ServiceJobTypeSagemakerTraining, QuotaShareName: aws.String("a"),
			ServiceRequestPayload: aws.String(`{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"ResourceConfig":{"InstanceType":"` + typ + `","InstanceCount":1}}`)})
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ClientException" || !strings.Contains(ae.ErrorMessage(), "serviceRequestPayload.ResourceConfig.InstanceType: ") ||
			!strings.Contains(ae.ErrorMessage(), want) {
			t.Errorf("%s: %v, want %q", typ, err, want)
		}
	}
	if l := must[*batch.ListServiceJobsOutput](t)(c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q")})); len(l.JobSummaryList) != 0 {
		t.Errorf("refused submits made %d jobs", len(l.JobSummaryList))
	}
}
