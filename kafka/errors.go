package kafka

import "errors"

var (
	// ErrPartitionCount is returned (wrapped, naming the topic and both figures) by Run when
	// the input topic's partition count does not divide Config.MaxParallelism: each partition
	// must own a fixed, contiguous and equal key-group range, so that a partition's state can
	// be restored from its own checkpoints alone.
	ErrPartitionCount = errors.New("strata/kafka: input partition count does not divide MaxParallelism")
	// ErrForeignCheckpoint is returned (wrapped) by Run when the consumer group's committed
	// offset or a checkpoint it names belongs to another job, topic or partition, or to a
	// checkpoint whose input position disagrees with the committed offset: restoring it would
	// mix another job's state into this one.
	ErrForeignCheckpoint = errors.New("strata/kafka: checkpoint of another job")
	// ErrInvalidConfig is returned (wrapped, naming the field) by New for a bad Config.
	ErrInvalidConfig = errors.New("strata/kafka: invalid config")
	// ErrBadPosition is returned (wrapped) by DecodePosition for bytes that are not an input
	// position this package wrote (magic, version, length or CRC32C wrong).
	ErrBadPosition = errors.New("strata/kafka: bad input position")
)
