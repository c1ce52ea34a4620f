package server

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestInstanceTypes: capacity limits name SageMaker Training instance types, or the
// private ones the server was given; anything else is refused naming the field, and so
// is a share limit on a type its queue's environment does not have, naming both. A
// refused request changes nothing.
func TestInstanceTypes(t *testing.T) {
	data := t.TempDir()
	s, err := Start(Config{Addr: "127.0.0.1:0", Data: data, Grace: time.Second, Logf: t.Logf, InstanceTypes: []string{"onprem.a100x8"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		killJobs(data)
	})
	c := newClient(s.URL)
	env := func(name, typ string) error {
		_, err := c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String(name),
			ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
			CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String(typ), MaxCapacity: aws.Int32(2)}}})
		return err
	}
	for _, bad := range []string{"ml.nosuch.type", strings.Repeat("x", 5000), "ml.g5.xlarge\x00", "g5.xlarge"} {
		err := env("bad", bad)
		clientError(t, err, "capacityLimits[0].capacityUnit: ")
		if err != nil && !strings.Contains(err.Error(), "is not a SageMaker Training instance type") {
			t.Errorf("environment of %.20q: %v", bad, err)
		}
	}
	if out, _ := c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{}); len(out.ServiceEnvironments) != 0 {
		t.Fatalf("a refused environment was created: %+v", out.ServiceEnvironments)
	}
	for _, ok := range []string{"ml.p5.48xlarge", "ml.trn1.32xlarge", "onprem.a100x8"} {
		if err := env(strings.ReplaceAll(ok, ".", "-"), ok); err != nil {
			t.Errorf("environment of %s: %v", ok, err)
		}
	}

	setup(t, c, "q", 2, share("a", types.QuotaShareResourceSharingStrategyLend, 1, nil, false))
	in := share("b", types.QuotaShareResourceSharingStrategyLend, 1, nil, false)
	in.JobQueue = aws.String("q")
	in.CapacityLimits[0].CapacityUnit = aws.String("ml.p5.48xlarge")
	_, err = c.CreateQuotaShare(ctx, in)
	clientError(t, err, "capacityLimits[0].capacityUnit: ml.p5.48xlarge is not in service environment q-env of job queue q, which has ml.g5.xlarge")
	in.CapacityLimits[0].CapacityUnit = aws.String("ml.nosuch.type")
	_, err = c.CreateQuotaShare(ctx, in)
	clientError(t, err, "capacityLimits[0].capacityUnit: \"ml.nosuch.type\" is not a SageMaker Training instance type")
	_, err = c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String("arn:aws:batch:us-east-1:000000000000:job-queue/q/quota-share/a"),
		CapacityLimits: []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.p5.48xlarge"), MaxCapacity: aws.Int32(1)}}})
	clientError(t, err, "ml.p5.48xlarge is not in service environment q-env")
	list, err := c.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String("q")})
	if err != nil || len(list.QuotaShares) != 1 || aws.ToString(list.QuotaShares[0].CapacityLimits[0].CapacityUnit) != "ml.g5.xlarge" {
		t.Errorf("after the refusals: %+v %v", list, err)
	}
}
