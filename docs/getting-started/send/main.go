// Command send puts messages on the queue named by QUEUE_URL, one per
// argument (make send runs it against the queue make local polls):
//
//	go run ./send '{"user_id":"u-1","email":"ada@example.com","name":"Ada"}'
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

func main() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	queue := os.Getenv("QUEUE_URL")
	if queue == "" {
		log.Fatal("QUEUE_URL is not set")
	}
	client := sqs.NewFromConfig(cfg)
	for _, body := range os.Args[1:] {
		out, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String(body)})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("sent", aws.ToString(out.MessageId), body)
	}
}
