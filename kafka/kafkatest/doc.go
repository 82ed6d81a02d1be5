// Package kafkatest holds what package kafka's tests, benchmarks and the commands that run a
// job on Kafka (bench/cmd/flightkafka) share to look at a job from outside: reading its
// committed output as a read_committed consumer. It starts no goroutine of its own; its
// functions block until they return.
package kafkatest
