#define TINYGPT_VERSION "0.1.0 (d5ee693)"
