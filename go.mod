module github.com/amk-dev/amk

go 1.26
