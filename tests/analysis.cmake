# The effect analyses (epsilon, padding, equivalence, invariance, batch_dependence,
# train_eval): end to end through the built binary, plus their shared batch helpers.
normlab_cli_test(test_analyses SOURCES test_analyses.cpp test_analyses_more.cpp DEPS normlab_analysis normlab_data)
# The backward pass through the user route: gradients, jacobian, apply's upstream and grad_*.
normlab_cli_test(test_gradients SOURCES test_gradients.cpp DEPS normlab_data)
