from healthbench.cli.app import main

main()
