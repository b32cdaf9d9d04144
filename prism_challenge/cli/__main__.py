from prism_challenge.cli.app import main

main()
