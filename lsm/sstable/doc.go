// Package sstable is the file format of Strata's LsmStore: immutable files
// of CRC32C-checksummed data blocks in entry order, each block with its own
// hash index over Order, a bloom filter over Order and a file index that
// jumps to the block by Order range. (Full design notes follow in doc.go.)
package sstable
