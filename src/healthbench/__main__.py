from healthbench.process_settings import apply

apply()  # before the command line's imports (see healthbench.process_settings)

from healthbench.cli.app import main  # noqa: E402

main()
