// plot_logs.h: the `tinygpt plot` command: the loss curves of a log.csv
// that `tinygpt train` wrote, redrawn as a PNG, or the validation curves of
// several logs compared on one picture.
//
// Reading order: file 41 (glue code), after plot.h (file 30), which reads a
// log into a LossHistory and draws it; this file only turns the command
// line into calls to it: which logs, x the step or the training time, y in
// nats per token or bits per byte, the labels, the title, and where the PNG
// goes.
#ifndef TINYGPT_PLOT_LOGS_H
#define TINYGPT_PLOT_LOGS_H

// cmd_plot: the `tinygpt plot` command.
int cmd_plot(int argc, char **argv);

#endif
