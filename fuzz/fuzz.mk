# Builds the fuzz targets with clang and libFuzzer; `make fuzz` runs it with the
# variables below. A plain GNU makefile beside automake's, because automake builds
# with one C compiler: here the library's C sources are compiled again, with
# -fsanitize=fuzzer-no-link,address,undefined, into $(OUT)/obj, and each target is
# linked with libFuzzer's main.
# In: srcdir, OUT, CC (clang), CPPFLAGS, LIBS, LIB_SOURCES (the library's sources),
# TARGETS. (The CUDA module is no part of the library: the targets never load it.)
FLAGS = -std=c11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=undefined -Wall -Wno-unused-parameter
LIB_OBJS = $(patsubst %.c,$(OUT)/obj/%.o,$(filter %.c,$(LIB_SOURCES)))
CLI_OBJS = $(OUT)/obj/src/cli/train_options.o $(OUT)/obj/src/cli/options.o

.SECONDARY:
all: $(addprefix $(OUT)/,$(TARGETS))

$(OUT)/obj/%.o: $(srcdir)/%.c
	@mkdir -p $(@D)
	@echo "  CC (fuzz) $*.c"
	@$(CC) $(FLAGS) $(CPPFLAGS) -MMD -MP -c $< -o $@

$(OUT)/libpipenet-fuzz.a: $(LIB_OBJS)
	@rm -f $@
	@ar rcs $@ $^

# fuzz_train_config reads options as `pipenet train` does, with its option parser.
$(OUT)/fuzz_train_config: $(CLI_OBJS)

$(OUT)/fuzz_%: $(OUT)/obj/fuzz/fuzz_%.o $(OUT)/obj/fuzz/fuzz_util.o $(OUT)/libpipenet-fuzz.a
	@echo "  CCLD (fuzz) $@"
	@$(CC) $(FLAGS) -fsanitize=fuzzer $(filter %.o,$^) $(filter %.a,$^) \
		$(LIBS) -o $@

-include $(LIB_OBJS:.o=.d) $(wildcard $(OUT)/obj/fuzz/*.d)
.PHONY: all
