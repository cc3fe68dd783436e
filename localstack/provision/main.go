package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "provision:", err)
		os.Exit(1)
	}
}

const usage = "usage: provision create [-resources FILE] [-prefix P] [-wait D] [-tables=false] | wait [-wait D] [-tables=false] | freeport [N]"

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	resources := fs.String("resources", "localstack/resources.json", "resource description")
	prefix := fs.String("prefix", "", "prepended to every table and queue name")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for the services to answer")
	tables := fs.Bool("tables", true, "create the tables (false: only the queues, and no DynamoDB endpoint is needed)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "freeport":
		n := 1
		if fs.NArg() > 0 {
			v, err := strconv.Atoi(fs.Arg(0))
			if err != nil || v < 1 {
				return fmt.Errorf("freeport: bad count %q", fs.Arg(0))
			}
			n = v
		}
		return freePorts(n)
	case "wait", "create":
	default:
		return errors.New(usage)
	}
	c, err := clients(ctx, *tables)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, *wait)
	err = WaitReady(wctx, c)
	cancel()
	if err != nil || args[0] == "wait" {
		return err
	}
	spec, err := LoadSpec(*resources)
	if err != nil {
		return err
	}
	if !*tables {
		spec.Tables = nil
	}
	_, err = Provision(ctx, c, spec.WithPrefix(*prefix), os.Stdout)
	return err
}

// clients builds SDK clients for the local endpoints only; without
// withTables, only the SQS client (Clients.DynamoDB is nil).
func clients(ctx context.Context, withTables bool) (Clients, error) {
	ddbURL, sqsURL := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), os.Getenv("AWS_ENDPOINT_URL_SQS")
	switch {
	case withTables && (ddbURL == "" || sqsURL == ""):
		return Clients{}, errors.New("AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_SQS must both be set: provision only talks to local services (-tables=false needs only the SQS one)")
	case sqsURL == "":
		return Clients{}, errors.New("AWS_ENDPOINT_URL_SQS must be set: provision only talks to local services")
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion(region),
		// Local services accept any key; fixed ones keep a developer's
		// real credentials out of every request.
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
	)
	if err != nil {
		return Clients{}, err
	}
	c := Clients{SQS: sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(sqsURL) })}
	if withTables {
		c.DynamoDB = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(ddbURL)
		}, dynamo.ChecksumsOnAWSOnly())
	}
	return c, nil
}

// freePorts prints n distinct free loopback ports. All n listeners are held
// open together so the kernel cannot hand out the same port twice; another
// process can still take one before the service binds it, which stack.sh
// notices as a service that exits at start.
func freePorts(n int) error {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ls = append(ls, l)
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
	}
	return nil
}
